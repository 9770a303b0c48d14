/// An error that a ``Job`` itself raises: bad JSON, a lost connection, an output that was not
/// persisted.
///
/// Like ``LoadableError``, it is a struct with a stable ``Code`` rather than an enum, so new codes
/// can be added without breaking the API. Two values are equal when their codes are; the
/// ``message`` explains the particular occurrence.
///
/// ```swift
/// do {
///   job = try Job<DownloadTiles>.fromJSON(data)
/// } catch let error as JobError where error == .unsupportedSchemaVersion {
///   askTheUserToUpdateTheApp()
/// }
/// ```
///
/// Cancellation is never a `JobError`: a cancelled job fails with Swift's `CancellationError`.
public struct JobError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A stable identifier for a kind of ``JobError``.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code's stable name, as it appears in descriptions and in a failed job's JSON form.
    public var rawValue: String
    /// Creates a code from its stable name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code's stable name.
    public var description: String { rawValue }

    /// The data is not a job's JSON form: not JSON, a missing or mistyped field, an invalid
    /// value, or parameters or a checkpoint that the work's types cannot decode.
    public static let malformed = Code(rawValue: "malformed")
    /// The data ends before its JSON value does, as a file cut short by a crash does.
    public static let truncated = Code(rawValue: "truncated")
    /// The JSON holds a job of another kind than the one asked for.
    public static let kindMismatch = Code(rawValue: "kindMismatch")
    /// A ``JobRegistry`` has no work type registered for the JSON's kind.
    public static let unknownKind = Code(rawValue: "unknownKind")
    /// The JSON was written by a newer version of LoadableKit, with a schema this one cannot read.
    public static let unsupportedSchemaVersion = Code(rawValue: "unsupportedSchemaVersion")
    /// The work kept failing with transient errors for longer than the job's
    /// ``JobOptions/transientWindow``.
    public static let connectionLost = Code(rawValue: "connectionLost")
    /// The job was restored from JSON after it finished; outputs are not persisted.
    public static let outputNotPersisted = Code(rawValue: "outputNotPersisted")
    /// The job was restored from JSON after it failed with an error of a type that JSON cannot
    /// bring back (neither a ``JobError``, a ``ServerJobError`` nor `CancellationError`):
    /// ``JobError/originalError`` says what it was, and the message is its description.
    public static let workFailed = Code(rawValue: "workFailed")
    /// ``Job/toJSON()`` could not encode the work or its checkpoint.
    public static let encodingFailed = Code(rawValue: "encodingFailed")
    /// Another ``JobManager`` (in this process or another) holds the job store's directory.
    public static let storeLocked = Code(rawValue: "storeLocked")
    /// A ``JobStore`` could not read, write or remove a job's record: the message says which file
    /// and why.
    public static let storeFailed = Code(rawValue: "storeFailed")
    /// A ``JobManager`` holds no job with the given identifier, or was given a job it cannot
    /// persist.
    public static let unknownJob = Code(rawValue: "unknownJob")
    /// A ``JobManager`` already holds a job with the identifier an app chose for another one
    /// (``JobManager/add(_:id:)``).
    public static let duplicateID = Code(rawValue: "duplicateID")
  }

  /// What an error that a restored job failed with was, as far as JSON holds it: its domain, code
  /// and description, as `NSError` bridging gives them (for a Swift error, the domain is the
  /// type's qualified name and the code its case's number, or what its `CustomNSError`
  /// conformance says).
  ///
  /// ```swift
  /// if let original = (job.error as? JobError)?.originalError,
  ///   original.domain == NSURLErrorDomain, original.code == NSURLErrorNotConnectedToInternet {
  ///   show("The job stopped when the device went offline")
  /// }
  /// ```
  public struct OriginalError: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The error's domain: `NSError.domain`.
    public var domain: String
    /// The error's code in its domain: `NSError.code`.
    public var code: Int
    /// The error's description, `String(describing:)`.
    public var description: String

    /// Creates the record of an error.
    public init(domain: String, code: Int, description: String) {
      self.domain = domain
      self.code = code
      self.description = description
    }
  }

  /// The stable code of this error; equality and hashing use only the code.
  public var code: Code
  /// A human-readable explanation of this occurrence.
  public var message: String
  /// The error that caused this one, when there is one: the last transient error for
  /// ``Code/connectionLost``, the encoder's error for ``Code/encodingFailed``.
  public var underlyingError: (any Error)?
  /// For ``Code/workFailed``: the error a job failed with before it was persisted and restored,
  /// by its domain, code and description; `nil` for other codes and for records written before
  /// LoadableKit kept it.
  public var originalError: OriginalError?

  /// Creates an error with a code, a message and, optionally, the error that caused it.
  public init(code: Code, message: String, underlyingError: (any Error)? = nil) {
    self.code = code
    self.message = message
    self.underlyingError = underlyingError
  }

  /// A ``Code/workFailed`` error that says what a restored job's error was.
  init(restoring original: OriginalError) {
    self.init(code: .workFailed, message: original.description)
    originalError = original
  }

  /// `JobError.<code>: <message>`.
  public var description: String { "JobError.\(code): \(message)" }

  /// Whether two errors have the same ``code``; the messages and underlying errors do not count.
  public static func == (lhs: JobError, rhs: JobError) -> Bool { lhs.code == rhs.code }
  /// Hashes the ``code`` only, consistently with ``==(_:_:)``.
  public func hash(into hasher: inout Hasher) { hasher.combine(code) }

  /// An error with the ``Code/malformed`` code and no particular message; use it to compare.
  public static var malformed: JobError { JobError(code: .malformed, message: "the data is not a job's JSON form") }
  /// An error with the ``Code/truncated`` code; use it to compare.
  public static var truncated: JobError { JobError(code: .truncated, message: "the JSON ends early") }
  /// An error with the ``Code/kindMismatch`` code; use it to compare.
  public static var kindMismatch: JobError { JobError(code: .kindMismatch, message: "the JSON holds a job of another kind") }
  /// An error with the ``Code/unknownKind`` code; use it to compare.
  public static var unknownKind: JobError { JobError(code: .unknownKind, message: "no work type is registered for the kind") }
  /// An error with the ``Code/unsupportedSchemaVersion`` code; use it to compare.
  public static var unsupportedSchemaVersion: JobError {
    JobError(code: .unsupportedSchemaVersion, message: "the JSON has a newer schema version")
  }
  /// An error with the ``Code/connectionLost`` code; use it to compare.
  public static var connectionLost: JobError { JobError(code: .connectionLost, message: "the connection was lost") }
  /// An error with the ``Code/outputNotPersisted`` code; use it to compare.
  public static var outputNotPersisted: JobError {
    JobError(code: .outputNotPersisted, message: "the job was restored after it finished; outputs are not persisted")
  }
  /// An error with the ``Code/workFailed`` code; use it to compare.
  public static var workFailed: JobError { JobError(code: .workFailed, message: "the work failed") }
  /// An error with the ``Code/storeLocked`` code; use it to compare.
  public static var storeLocked: JobError { JobError(code: .storeLocked, message: "another job manager holds the store") }
  /// An error with the ``Code/storeFailed`` code; use it to compare.
  public static var storeFailed: JobError { JobError(code: .storeFailed, message: "the job store failed") }
  /// An error with the ``Code/unknownJob`` code; use it to compare.
  public static var unknownJob: JobError { JobError(code: .unknownJob, message: "the job manager holds no such job") }
  /// An error with the ``Code/duplicateID`` code; use it to compare.
  public static var duplicateID: JobError { JobError(code: .duplicateID, message: "the job manager holds a job with that identifier") }
  /// An error with the ``Code/encodingFailed`` code; use it to compare.
  public static var encodingFailed: JobError { JobError(code: .encodingFailed, message: "the job could not be encoded") }
}
