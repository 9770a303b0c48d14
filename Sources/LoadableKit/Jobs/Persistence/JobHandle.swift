import Foundation

/// A ``Job`` whose work type is not known statically, as ``JobRegistry`` returns it.
///
/// Every `Job` conforms. Its id in a manager, its server job's id and a cancel that reports the
/// server's answer need no cast; for ``Job/output`` and the checkpoint, get the concrete
/// `Job<Work>` with ``JobManager/job(id:as:)`` or ``ManagedJob/job(as:)``, or cast:
///
/// ```swift
/// let job = try registry.job(fromJSON: data)
/// job.start()
/// if let download = job as? Job<DownloadTiles> {
///   let count = try await download.output
/// }
/// ```
public protocol JobHandle: AnyObject, Sendable {
  /// The kind of the job's work: ``JobWork/kind``.
  var kind: String { get }
  /// The current status. See ``Job/status``.
  var status: JobStatus { get }
  /// The messages posted so far. See ``Job/messages``.
  var messages: [JobMessage] { get }
  /// The fraction of the work completed. See ``Job/fractionCompleted``.
  var fractionCompleted: Double { get }
  /// Why the job failed. See ``Job/error``.
  var error: (any Error)? { get }
  /// Status, progress, messages and error in one read. See ``Job/snapshot``.
  var snapshot: JobSnapshot { get }
  /// The job's events, the current state first. See ``Job/events``.
  var events: AsyncStream<JobEvent> { get }
  /// Starts or resumes the job. See ``Job/start()``.
  @discardableResult func start() -> Bool
  /// Pauses the job. See ``Job/pause()``.
  @discardableResult func pause() -> Bool
  /// Cancels the job and waits for its work to stop. See ``Job/cancel()``.
  @discardableResult nonisolated(nonsending) func cancel() async -> Bool
  /// Waits until a paused job's work is parked. See ``Job/waitUntilParked()``.
  nonisolated(nonsending) func waitUntilParked() async
  /// The job's JSON form. See ``Job/toJSON()``.
  func toJSON() throws -> Data
  /// The job's identifier in the ``JobManager`` that holds it. See ``Job/managedID``.
  var managedID: String? { get }
  /// The id of the job on the server, for a server job. See ``Job/serverJobID``.
  var serverJobID: String? { get }
  /// Cancels the job and says whether the server cancelled too. See ``Job/cancelAndReport()``.
  nonisolated(nonsending) func cancelAndReport() async -> JobCancelOutcome
}

/// What ``Job/cancelAndReport()`` did.
public enum JobCancelOutcome: Sendable, Hashable {
  /// The job had already finished: nothing was cancelled.
  case notCancelled
  /// The job was cancelled; a server job's server cancelled its job too (or the job had not
  /// reached the server, or had already ended there).
  case cancelled
  /// The job was cancelled here, but its server refused to cancel its job
  /// (``ServerJobError/Code/cancelNotSupported``) or could not be asked
  /// (``ServerJobError/Code/cancelFailed``): the job may go on on the server.
  case serverDidNotCancel(ServerJobError)
}

extension Job: JobHandle {
  /// The kind of the job's work: `Work.kind`.
  public var kind: String { Work.kind }
}
