/// What a server says about one of its jobs: where it is, its new messages and its progress.
///
/// ``ServerJobService/status(ofJob:messagesAfter:)`` and ``ServerJobService/cancel(job:)``
/// return it. It is `Codable`, so an HTTP client can decode it from the server's answer.
public struct ServerJobStatus: Sendable, Codable, Hashable {
  /// Where a server job is, as ArcGIS job statuses name it.
  public enum State: String, Sendable, Codable, Hashable {
    /// The server accepted the job and has not started it.
    case submitted
    /// The job waits for the server's resources.
    case waiting
    /// The server is running the job.
    case executing
    /// The server is cancelling the job.
    case cancelling
    /// The job ended with a result. Terminal.
    case succeeded
    /// The job ended with an error. Terminal.
    case failed
    /// The job ran out of the time the server allows. Terminal.
    case timedOut
    /// The job was cancelled. Terminal.
    case cancelled

    /// Whether the job ended: ``succeeded``, ``failed``, ``timedOut`` or ``cancelled``.
    public var isFinished: Bool {
      switch self {
      case .succeeded, .failed, .timedOut, .cancelled: true
      case .submitted, .waiting, .executing, .cancelling: false
      }
    }
  }

  /// Where the job is.
  public var state: State
  /// The job's messages that the request asked for, in order; see ``ServerJobMessage``.
  public var messages: [ServerJobMessage]
  /// The fraction of the job that is done, from 0 to 1, when the server knows it.
  public var progress: Double?

  /// Creates a status.
  ///
  /// - Parameters:
  ///   - state: Where the job is.
  ///   - messages: Its messages after the sequence number the request named.
  ///   - progress: The fraction done, from 0 to 1, if known.
  public init(state: State, messages: [ServerJobMessage] = [], progress: Double? = nil) {
    self.state = state
    self.messages = messages
    self.progress = progress
  }
}
