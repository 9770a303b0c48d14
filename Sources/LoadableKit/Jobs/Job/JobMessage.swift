import Foundation

/// A message that a ``Job`` posted while it ran: what it did, what went wrong, what it retried.
///
/// The work posts messages with ``JobContext/post(_:severity:)``; the job adds its own (with the
/// ``source`` `"LoadableKit"`) when it retries a transient error or gives up. Messages are kept in
/// ``Job/messages`` in the order they were posted, and saved in the job's JSON form.
public struct JobMessage: Sendable, Codable, Hashable {
  /// How important a ``JobMessage`` is.
  public enum Severity: String, Sendable, Codable, Hashable {
    /// Progress information.
    case info
    /// Something went wrong but the job goes on, for example a transient error that is retried.
    case warning
    /// Something went wrong and the job failed because of it.
    case error
  }

  /// The message text.
  public var text: String
  /// How important the message is.
  public var severity: Severity
  /// Who posted the message: `nil` for the work's own messages unless it names a source,
  /// `"LoadableKit"` for the messages of the job machinery.
  public var source: String?
  /// When the message was posted.
  public var timestamp: Date

  /// Creates a message.
  ///
  /// - Parameters:
  ///   - text: The message text.
  ///   - severity: How important it is; `.info` by default.
  ///   - source: Who posted it, if that matters.
  ///   - timestamp: When it was posted; now by default.
  public init(_ text: String, severity: Severity = .info, source: String? = nil, timestamp: Date = Date()) {
    self.text = text
    self.severity = severity
    self.source = source
    self.timestamp = timestamp
  }
}
