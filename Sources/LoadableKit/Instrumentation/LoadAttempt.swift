/// One attempt of a loadable, as an instrument hears of it (see ``LoadInstrument``).
public struct LoadAttempt: Sendable, Identifiable, CustomStringConvertible {
  /// Identifies an attempt within the process. Parents refer to their children's requesters by it.
  public struct ID: Hashable, Sendable, CustomStringConvertible {
    /// A number unique within the process.
    public var rawValue: UInt64
    /// Creates an identifier from its number.
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// `#` and the number, such as `"#42"`.
    public var description: String { "#\(rawValue)" }
  }

  /// Why the attempt runs; its dependencies are loaded with the same intent.
  public enum Intent: String, Sendable, Hashable, CustomStringConvertible {
    /// `load()` (or `load(completion:)`).
    case load
    /// `retryLoad()`: a failed dependency is tried again.
    case retry
    /// `fetch()` or `sync()`: loaded content is refreshed.
    case refresh
    /// `fetchIfNeeded()` or `syncIfNeeded()`.
    case ifNeeded

    /// The raw value, such as `"refresh"`.
    public var description: String { rawValue }
  }

  /// The attempt's identifier.
  public var id: ID
  /// The loadable's ``AsyncLoadable/displayName``.
  public var name: String
  /// Why it runs.
  public var intent: Intent
  /// The attempt of the dependent that asked for this one, if it was asked for by an attempt
  /// (as a declared dependency, a combinator's source, or through ``AsyncLoadable/loadDependency(_:)``).
  public var parent: ID?
  /// When it started, on the continuous clock.
  public var startedAt: ContinuousClock.Instant

  /// The name, the intent and the identifier, such as `"portal (load #42)"`.
  public var description: String { "\(name) (\(intent) \(id))" }

  /// How an attempt ended.
  public enum Outcome: Sendable, CustomStringConvertible {
    /// It succeeded; the loadable is loaded.
    case loaded
    /// It failed with this error (the last one, after any retries).
    case failed(any Error)
    /// It was cancelled: by ``AsyncLoadable/cancelLoad()``, by a cascade from a dependent, or because
    /// its work threw `CancellationError`.
    case cancelled
    /// Its last try exceeded the ``LoadOptions/timeout``.
    case timedOut

    /// `"loaded"`, `"failed: <error>"`, `"cancelled"` or `"timedOut"`.
    public var description: String {
      switch self {
      case .loaded: "loaded"
      case .failed(let error): "failed: \(error)"
      case .cancelled: "cancelled"
      case .timedOut: "timedOut"
      }
    }
  }

  /// What an instrument learns when an attempt ends.
  public struct End: Sendable {
    /// How it ended.
    public var outcome: Outcome
    /// From its start to its end.
    public var duration: Duration
    /// How many times the ``RetryPolicy`` tried `performLoad()` again within it.
    public var retries: Int
    /// How many callers and completion handlers waited for it over its life, the first included.
    public var callers: Int
  }

  /// A try that failed and is about to be retried.
  public struct Retry: Sendable {
    /// 1 for the first retry.
    public var number: Int
    /// The error of the try that failed.
    public var error: any Error
    /// How long the attempt waits before the retry.
    public var delay: Duration
  }
}
