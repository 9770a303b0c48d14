/// An error that LoadableKit itself raises.
///
/// `LoadableError` is a struct with a stable ``Code`` rather than an enum, so new codes can be
/// added without breaking the API. Two values are equal when their codes are equal; the
/// ``message`` only explains the particular occurrence.
///
/// ```swift
/// do {
///   _ = try await thumbnail.fetch()
/// } catch let error as LoadableError where error == .noContent {
///   showPlaceholder()
/// }
/// ```
///
/// Cancellation is never a `LoadableError`: it is always Swift's `CancellationError`.
public struct LoadableError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A stable identifier for a kind of ``LoadableError``.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code's stable name.
    public var rawValue: String
    /// Creates a code from its stable name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code's stable name.
    public var description: String { rawValue }

    /// An attempt succeeded but its content is not available.
    public static let noContent = Code(rawValue: "noContent")
    /// Loading a dependency would wait for itself.
    public static let dependencyCycle = Code(rawValue: "dependencyCycle")
    /// An attempt did not finish within its timeout.
    public static let timedOut = Code(rawValue: "timedOut")
    /// A paged source returned a next cursor it had already returned: following it would loop.
    public static let repeatedCursor = Code(rawValue: "repeatedCursor")
    /// A paged source returned, for the cursor of a page dropped before the pages held, a page
    /// that does not lead to the first page held: the source changed since; a refresh loads it anew.
    public static let sourceMoved = Code(rawValue: "sourceMoved")
  }

  /// The stable code of this error; equality and hashing use only the code.
  public var code: Code
  /// A human-readable explanation of this occurrence.
  public var message: String

  /// Creates an error with a code and a message.
  public init(code: Code, message: String) {
    self.code = code
    self.message = message
  }

  /// The code and the message, such as `"LoadableError.timedOut: the load did not finish in time"`.
  public var description: String { "LoadableError.\(code): \(message)" }

  /// Two errors are equal when their codes are equal, whatever their messages.
  public static func == (lhs: LoadableError, rhs: LoadableError) -> Bool { lhs.code == rhs.code }
  /// Hashes the code only, consistently with `==`.
  public func hash(into hasher: inout Hasher) { hasher.combine(code) }

  /// The attempt succeeded, but `isContentAvailable` is `false`, so there is no content to return.
  public static var noContent: LoadableError {
    LoadableError(code: .noContent, message: "the load succeeded but no content is available")
  }
  /// A load waited, directly or through other loadables, for itself.
  public static var dependencyCycle: LoadableError {
    LoadableError(code: .dependencyCycle, message: "a loadable depends on itself")
  }
  /// An attempt took longer than its timeout and was cancelled.
  public static var timedOut: LoadableError {
    LoadableError(code: .timedOut, message: "the load did not finish in time")
  }
  /// A paged source returned a next cursor it had already returned (a bug of the source): a
  /// ``PagedLoadable`` fails that page with this error rather than load the same pages forever.
  public static var repeatedCursor: LoadableError {
    LoadableError(code: .repeatedCursor, message: "the source returned a next cursor it had returned before")
  }
  /// A paged source returned, for a page dropped before the pages held, a page that no longer
  /// leads to the first page held (items were added or removed since): a ``PagedLoadable`` fails
  /// that previous page with this error rather than hold pages that do not line up.
  public static var sourceMoved: LoadableError {
    LoadableError(code: .sourceMoved, message: "the source changed: the previous page no longer leads to the pages held")
  }
}
