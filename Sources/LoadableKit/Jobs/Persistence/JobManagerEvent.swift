/// Something that happened in a ``JobManager``, as ``JobManager/events`` delivers it.
public enum JobManagerEvent: Sendable {
  /// A job was added with ``JobManager/add(_:)``.
  case added(id: String)
  /// A job was removed with ``JobManager/remove(id:)``.
  case removed(id: String)
  /// A job the manager holds changed: its status, progress or messages.
  case job(id: String, JobEvent)
  /// The store could not save a job; the job goes on, and the manager tries again at its next
  /// change.
  case saveFailed(id: String, JobError)
}

/// A job that a ``JobManager`` holds, with the identifier that names its record in the store.
public struct ManagedJob: Sendable, Identifiable {
  /// The job's identifier in its manager and its store.
  public let id: String
  /// The job.
  public let job: any JobHandle

  /// Creates a managed job.
  public init(id: String, job: any JobHandle) {
    self.id = id
    self.job = job
  }

  /// The job as a `Job<Work>`, or `nil` when its work is of another type: its output and
  /// checkpoint without a cast.
  public func job<Work: JobWork>(as type: Work.Type) -> Job<Work>? {
    job as? Job<Work>
  }
}

/// A record a ``JobManager`` found in its store and could not restore.
public struct JobRestoreProblem: Sendable {
  /// The record's identifier in the store.
  public var id: String
  /// Why it could not be restored: ``JobError/Code/truncated``, ``JobError/Code/malformed``,
  /// ``JobError/Code/unsupportedSchemaVersion`` (a newer version of the app wrote it),
  /// ``JobError/Code/unknownKind`` (no work type is registered for its kind) or
  /// ``JobError/Code/storeFailed`` (it could not be read).
  public var error: JobError
  /// Whether the manager moved the record aside (``JobStore/setAside(id:)``): truncated and
  /// malformed records are; records another version or app may still read stay where they are.
  public var wasSetAside: Bool

  /// Creates a problem report.
  public init(id: String, error: JobError, wasSetAside: Bool) {
    self.id = id
    self.error = error
    self.wasSetAside = wasSetAside
  }
}
