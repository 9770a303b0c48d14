/// A message that a server posted about one of its jobs.
///
/// The server numbers the messages of a job `1, 2, 3, …` in the order it posts them; the
/// ``ServerJobRunner`` posts each number once as a ``JobMessage``, however many status reports
/// repeat it, and keeps the highest number it posted in the job's ``ServerJobCheckpoint``, so a
/// job restored from JSON does not post them again either.
public struct ServerJobMessage: Sendable, Codable, Hashable {
  /// The message's number among the job's messages, from 1, increasing in the order posted.
  public var sequence: Int
  /// The message text.
  public var text: String
  /// How important the message is.
  public var severity: JobMessage.Severity

  /// Creates a message.
  ///
  /// - Parameters:
  ///   - sequence: Its number among the job's messages, from 1.
  ///   - text: The message text.
  ///   - severity: How important it is; `.info` by default.
  public init(sequence: Int, text: String, severity: JobMessage.Severity = .info) {
    self.sequence = sequence
    self.text = text
    self.severity = severity
  }
}
