import Foundation

/// A ``Job`` whose work type is not known statically, as ``JobRegistry`` returns it.
///
/// Every `Job` conforms. Cast to the concrete `Job<Work>` to read its ``Job/output``:
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
}

extension Job: JobHandle {
  /// The kind of the job's work: `Work.kind`.
  public var kind: String { Work.kind }
}
