import Foundation

/// Where a ``JobManager`` keeps the JSON form of its jobs.
///
/// A store holds one record per job, named by the job's identifier in the manager. The manager
/// writes a job's record on each change (see ``JobManager``) and reads them all once, when it is
/// created. ``DirectoryJobStore`` is the default: one JSON file per job, written atomically.
/// Conform to keep jobs elsewhere (a database, the keychain, a test double).
///
/// The manager calls a store from one thread at a time per job, never under a lock of its own;
/// calls for different jobs may come concurrently. A store must not call back into the manager.
///
/// ```swift
/// final class MemoryJobStore: JobStore {
///   let records = Mutex<[String: Data]>([:])
///   func loadAll() throws -> [JobStoreRecord] {
///     records.withLock { $0.map { JobStoreRecord(id: $0.key, data: .success($0.value)) } }
///   }
///   func save(_ data: Data, id: String) throws { records.withLock { $0[id] = data } }
///   func remove(id: String) throws { records.withLock { _ = $0.removeValue(forKey: id) } }
///   func setAside(id: String) throws {}
/// }
/// ```
public protocol JobStore: Sendable {
  /// Every record in the store. A record that cannot be read has a failure as its data; the
  /// others load all the same.
  ///
  /// - Throws: ``JobError`` when the store as a whole cannot be read.
  func loadAll() throws -> [JobStoreRecord]

  /// Replaces the record of job `id` with `data`, or creates it. After a crash at any instant the
  /// record must hold either the previous data or `data`, never a mix.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/storeFailed`` when it cannot.
  func save(_ data: Data, id: String) throws

  /// Deletes the record of job `id`; does nothing when there is none.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/storeFailed`` when it cannot.
  func remove(id: String) throws

  /// Moves the record of job `id`, which cannot be restored (it is truncated or malformed), out of
  /// the way without deleting it, so that it is no longer loaded and a person can look at it.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/storeFailed`` when it cannot.
  func setAside(id: String) throws
}

/// One job's record in a ``JobStore``.
public struct JobStoreRecord: Sendable {
  /// The job's identifier in its ``JobManager``.
  public var id: String
  /// The job's JSON form, or why it could not be read.
  public var data: Result<Data, JobError>

  /// Creates a record.
  public init(id: String, data: Result<Data, JobError>) {
    self.id = id
    self.data = data
  }
}
