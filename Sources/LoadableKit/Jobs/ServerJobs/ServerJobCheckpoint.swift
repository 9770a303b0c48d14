/// The checkpoint of a ``JobWork`` that a ``ServerJobRunner`` drives: the server's job id and
/// what the client has seen of the job.
///
/// The runner saves it right after the server accepted the job, before anything else, so a job
/// persisted at any moment after the submission knows its server job, and a restored job
/// reconnects to it instead of submitting again. It is saved again whenever the server's job
/// changes state or posts new messages.
public struct ServerJobCheckpoint: Sendable, Codable, Hashable {
  /// The id the server gave the job.
  public var serverJobID: String
  /// The highest ``ServerJobMessage/sequence`` posted as a job message; the next status request
  /// asks only for the messages after it.
  public var messagesSeen: Int
  /// The last state the server reported.
  public var lastState: ServerJobStatus.State
  /// Why the server did not cancel the job when the ``Job`` was cancelled, if it did not:
  /// ``ServerJobError/Code/cancelNotSupported`` or ``ServerJobError/Code/cancelFailed``. The job
  /// itself fails with `CancellationError`, as every cancelled job does.
  public var cancelError: ServerJobError?

  /// Creates the checkpoint of a job the server just accepted.
  ///
  /// - Parameters:
  ///   - serverJobID: The id the server gave the job.
  ///   - messagesSeen: The highest message number already posted; 0 for none.
  ///   - lastState: The last state the server reported; ``ServerJobStatus/State/submitted`` by
  ///     default.
  public init(serverJobID: String, messagesSeen: Int = 0, lastState: ServerJobStatus.State = .submitted) {
    self.serverJobID = serverJobID
    self.messagesSeen = messagesSeen
    self.lastState = lastState
  }

  /// Takes in a status report: returns the messages not posted before, in sequence order and each
  /// sequence number once, and whether the checkpoint changed (new messages or a new state).
  mutating func absorb(_ status: ServerJobStatus) -> (fresh: [ServerJobMessage], changed: Bool) {
    var fresh: [ServerJobMessage] = []
    for message in status.messages.sorted(by: { $0.sequence < $1.sequence })
    where message.sequence > messagesSeen {
      fresh.append(message)
      messagesSeen = message.sequence
    }
    let changed = !fresh.isEmpty || status.state != lastState
    lastState = status.state
    return (fresh, changed)
  }
}
