/// An error about a job that runs on a server: the server could not cancel it, the job failed or
/// was cancelled on the server, or the server does not know it.
///
/// Like ``JobError``, it is a struct with a stable ``Code`` rather than an enum, so new codes can
/// be added without breaking the API. Two values are equal when their codes are. It is `Codable`
/// (its code and message; not the underlying error), so a ``ServerJobCheckpoint`` can keep one and
/// an HTTP client can decode one from a server's answer.
///
/// ```swift
/// await job.cancel()
/// if job.checkpoint?.cancelError == .cancelNotSupported {
///   show("The server goes on with the job; it cannot be cancelled")
/// }
/// ```
public struct ServerJobError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
  /// A stable identifier for a kind of ``ServerJobError``.
  public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The code's stable name.
    public var rawValue: String
    /// Creates a code from its stable name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code's stable name.
    public var description: String { rawValue }

    /// The server cannot cancel this job (or any job): it goes on running on the server.
    public static let cancelNotSupported = Code(rawValue: "cancelNotSupported")
    /// The request to cancel the job failed, for example because the server could not be
    /// reached; ``ServerJobError/underlyingError`` says why. The job may go on on the server.
    public static let cancelFailed = Code(rawValue: "cancelFailed")
    /// The server says the job failed or timed out.
    public static let serverJobFailed = Code(rawValue: "serverJobFailed")
    /// The server says the job was cancelled, and this client did not ask for it.
    public static let serverJobCancelled = Code(rawValue: "serverJobCancelled")
    /// The server does not know the job id, for example because it deleted an old job.
    public static let jobNotFound = Code(rawValue: "jobNotFound")
  }

  /// The stable code of this error; equality and hashing use only the code.
  public var code: Code
  /// A human-readable explanation of this occurrence.
  public var message: String
  /// The error that caused this one, when there is one. It is not encoded.
  public var underlyingError: (any Error)?

  /// Creates an error with a code, a message and, optionally, the error that caused it.
  public init(code: Code, message: String, underlyingError: (any Error)? = nil) {
    self.code = code
    self.message = message
    self.underlyingError = underlyingError
  }

  private enum CodingKeys: String, CodingKey { case code, message }

  /// Decodes the code and the message.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    code = try container.decode(Code.self, forKey: .code)
    message = try container.decode(String.self, forKey: .message)
  }

  /// Encodes the code and the message; the underlying error is not encoded.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(code, forKey: .code)
    try container.encode(message, forKey: .message)
  }

  /// `ServerJobError.<code>: <message>`.
  public var description: String { "ServerJobError.\(code): \(message)" }

  /// Whether two errors have the same ``code``; the messages and underlying errors do not count.
  public static func == (lhs: ServerJobError, rhs: ServerJobError) -> Bool { lhs.code == rhs.code }
  /// Hashes the ``code`` only, consistently with ``==(_:_:)``.
  public func hash(into hasher: inout Hasher) { hasher.combine(code) }

  /// An error with the ``Code/cancelNotSupported`` code; use it to compare, or throw it.
  public static var cancelNotSupported: ServerJobError {
    ServerJobError(code: .cancelNotSupported, message: "the server cannot cancel the job")
  }
  /// An error with the ``Code/cancelFailed`` code; use it to compare.
  public static var cancelFailed: ServerJobError {
    ServerJobError(code: .cancelFailed, message: "the request to cancel the job failed")
  }
  /// An error with the ``Code/serverJobFailed`` code; use it to compare.
  public static var serverJobFailed: ServerJobError {
    ServerJobError(code: .serverJobFailed, message: "the job failed on the server")
  }
  /// An error with the ``Code/serverJobCancelled`` code; use it to compare.
  public static var serverJobCancelled: ServerJobError {
    ServerJobError(code: .serverJobCancelled, message: "the job was cancelled on the server")
  }
  /// An error with the ``Code/jobNotFound`` code; use it to compare, or throw it.
  public static var jobNotFound: ServerJobError {
    ServerJobError(code: .jobNotFound, message: "the server does not know the job")
  }
}
