/// The observable state of a ``Job`` at one moment, read in one step.
///
/// ``Job/snapshot`` returns one, and every ``Job/events`` subscription starts with one.
public struct JobSnapshot: Sendable {
  /// The status.
  public var status: JobStatus
  /// The fraction of the work completed, from 0 to 1.
  public var fractionCompleted: Double
  /// The messages posted so far, oldest first.
  public var messages: [JobMessage]
  /// Why the job failed; non-`nil` exactly when ``status`` is ``JobStatus/failed``.
  public var error: (any Error)?
  /// How many messages were dropped, the oldest first, to keep ``messages`` within the job's
  /// ``Job/messageLimit``.
  public var droppedMessageCount: Int

  /// Creates a snapshot.
  public init(
    status: JobStatus, fractionCompleted: Double, messages: [JobMessage], error: (any Error)?,
    droppedMessageCount: Int = 0
  ) {
    self.droppedMessageCount = droppedMessageCount
    self.status = status
    self.fractionCompleted = fractionCompleted
    self.messages = messages
    self.error = error
  }
}
