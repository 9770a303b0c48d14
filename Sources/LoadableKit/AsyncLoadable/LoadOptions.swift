/// How a loadable runs its own attempts: retries with backoff, and a timeout.
///
/// Set ``AsyncLoadable/loadOptions`` before loading; the options apply from the next attempt.
/// Both the backoff and the timeout wait on ``clock``, so tests pass a test clock and never sleep.
///
/// ```swift
/// portal.loadOptions = LoadOptions(
///   retryPolicy: RetryPolicy(maxAttempts: 4, initialDelay: .milliseconds(250)),
///   timeout: .seconds(20))
/// ```
public struct LoadOptions: Sendable {
  /// Retries of ``AsyncLoadable/performLoad()`` within one attempt; `nil` for none.
  public var retryPolicy: RetryPolicy?
  /// The longest one call of ``AsyncLoadable/performLoad()`` may take; `nil` for no limit.
  ///
  /// When it passes, the call's task is cancelled and the try fails with
  /// ``LoadableError/timedOut`` once the work has stopped (work that ignores cancellation is
  /// waited for, so `performLoad()` never runs twice at once). A timeout counts as a failed try
  /// for the retry policy.
  public var timeout: Duration?
  /// The clock the backoff and the timeout wait on.
  public var clock: any Clock<Duration>

  /// Creates options.
  public init(retryPolicy: RetryPolicy? = nil, timeout: Duration? = nil, clock: any Clock<Duration> = ContinuousClock()) {
    self.retryPolicy = retryPolicy
    self.timeout = timeout
    self.clock = clock
  }

  /// Runs `work` under these options.
  func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
    var failures = 0
    while true {
      do {
        if let timeout { return try await Self.run(work, timeout: timeout, clock: clock) }
        return try await work()
      } catch {
        failures += 1
        guard let retryPolicy, failures < retryPolicy.maxAttempts, retryPolicy.shouldRetry(error),
          !Task.isCancelled, let delay = retryPolicy.delay(beforeRetry: failures, after: error)
        else { throw error }
        let probe = AttemptContext.current?.probe
        probe?.retrying(number: failures, error: error, delay: delay)
        try await clock.sleep(for: delay)
        probe?.retried()
      }
    }
  }

  private enum Race<T: Sendable>: Sendable {
    case value(T)
    case timedOut
  }

  private static func run<T: Sendable>(
    _ work: @escaping @Sendable () async throws -> T, timeout: Duration, clock: any Clock<Duration>
  ) async throws -> T {
    let context = AttemptContext.current
    return try await withThrowingTaskGroup(of: Race<T>.self) { group in
      group.addTask { .value(try await AttemptContext.runningAsAttemptsWork(context, work)) }
      group.addTask {
        try await clock.sleep(for: timeout)
        return .timedOut
      }
      defer { group.cancelAll() }
      guard let first = try await group.next() else { throw CancellationError() }
      switch first {
      case .value(let value):
        return value
      case .timedOut:
        context?.probe?.tryTimedOut()
        throw LoadableError(code: .timedOut, message: "the load did not finish within \(timeout)")
      }
    }
  }
}

/// When and how often a failed ``AsyncLoadable/performLoad()`` is tried again within one attempt.
///
/// The delays come from a ``Backoff``, the same type a job's retries use: the delay before retry
/// *n* (1 for the first) is `min(initialDelay × multiplierⁿ⁻¹, maxDelay)`, reduced by up to
/// `jitter` of itself at random so that many clients do not retry in step.
public struct RetryPolicy: Sendable {
  /// The most calls of `performLoad()` per attempt, the first included.
  public var maxAttempts: Int
  /// The delays between the calls: ``initialDelay``, ``multiplier``, ``maxDelay`` and ``jitter``
  /// are its fields under the names a retry policy gives them.
  public var backoff: Backoff
  /// The delay before the first retry.
  public var initialDelay: Duration {
    get { backoff.initial }
    set { backoff.initial = newValue }
  }
  /// The factor between consecutive delays.
  public var multiplier: Double {
    get { backoff.multiplier }
    set { backoff.multiplier = newValue }
  }
  /// The longest delay.
  public var maxDelay: Duration {
    get { backoff.maximum }
    set { backoff.maximum = newValue }
  }
  /// The fraction of each delay, from 0 to 1, that is randomly taken off.
  public var jitter: Double {
    get { backoff.jitter }
    set { backoff.jitter = newValue }
  }
  /// Which errors are worth retrying. The default retries everything but cancellation.
  public var shouldRetry: @Sendable (any Error) -> Bool
  /// A source of random numbers in `0..<1` for the jitter; replace it for reproducible delays.
  public var random: @Sendable () -> Double
  /// Whether an error that asks for a delay (a ``RetryAfterError``, such as an HTTP `503` with
  /// `Retry-After`) sets the delay before its retry. On by default.
  ///
  /// The retry then waits for the longer of the delay asked for and the backoff's. A delay longer
  /// than ``maxDelay`` ends the retries: the error is thrown at once rather than retried sooner
  /// than the server asked.
  public var honorsRetryAfter: Bool

  /// Creates a policy.
  public init(
    maxAttempts: Int = 3,
    initialDelay: Duration = .milliseconds(200),
    multiplier: Double = 2,
    maxDelay: Duration = .seconds(30),
    jitter: Double = 0.2,
    shouldRetry: @escaping @Sendable (any Error) -> Bool = { !($0 is CancellationError) },
    random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
    honorsRetryAfter: Bool = true
  ) {
    self.maxAttempts = max(1, maxAttempts)
    self.backoff = Backoff(initial: initialDelay, multiplier: multiplier, maximum: maxDelay, jitter: jitter)
    self.shouldRetry = shouldRetry
    self.random = random
    self.honorsRetryAfter = honorsRetryAfter
  }

  /// The delay before retry `retry` (1 for the first).
  public func delay(beforeRetry retry: Int) -> Duration {
    backoff.delay(forAttempt: retry, random: random)
  }

  /// The delay before retry `retry` (1 for the first) after `error`, or `nil` when the policy
  /// does not wait that long.
  ///
  /// When ``honorsRetryAfter`` is on and `error` is a ``RetryAfterError`` with a delay, it is the
  /// longer of that delay (a negative one counts as zero) and ``delay(beforeRetry:)``, or `nil`
  /// when the delay asked for is longer than ``maxDelay``. Otherwise it is
  /// ``delay(beforeRetry:)``.
  ///
  /// - Parameters:
  ///   - retry: Which retry: 1 for the first.
  ///   - error: The error the failed try threw.
  public func delay(beforeRetry retry: Int, after error: any Error) -> Duration? {
    let asked = honorsRetryAfter ? (error as? any RetryAfterError)?.retryAfter : nil
    return backoff.delay(forAttempt: retry, retryAfter: asked, random: random)
  }
}

/// An error that says how long to wait before trying again, such as an HTTP `503 Service
/// Unavailable` or `429 Too Many Requests` answer with a `Retry-After` header.
///
/// A ``RetryPolicy`` waits for the delay it asks for before retrying (see
/// ``RetryPolicy/honorsRetryAfter``), on the clock of the ``LoadOptions``:
///
/// ```swift
/// struct Unavailable: RetryAfterError {
///   var retryAfter: Duration?  // from the answer's Retry-After header
/// }
/// ```
public protocol RetryAfterError: Error {
  /// How long to wait before trying again; `nil` when the error does not say.
  var retryAfter: Duration? { get }
}

/// Configuration kept out of line, so a loadable that has none stays small.
final class LoadableSettings: Sendable {
  /// The options in an object of their own: an attempt holds them while it runs (as it held a
  /// copy of them before), and nothing else of the settings.
  let sharedOptions: SharedLoadOptions?
  var options: LoadOptions? { sharedOptions?.value }
  let name: String?
  let instrument: (any LoadInstrument)?

  init(options: LoadOptions?, name: String?, instrument: (any LoadInstrument)? = nil) {
    self.sharedOptions = options.map(SharedLoadOptions.init)
    self.name = name
    self.instrument = instrument
  }
}

/// A loadable's ``LoadOptions``, shared by its settings and its running attempt.
final class SharedLoadOptions: Sendable {
  let value: LoadOptions
  init(_ value: LoadOptions) { self.value = value }
}

extension AsyncLoadable {
  /// Retry policy and timeout for this loadable's attempts. Applies from the next attempt.
  public var loadOptions: LoadOptions {
    get { state.withLock(owner: self) { $0.extras?.settings?.options } ?? LoadOptions() }
    set {
      // The old settings (the user's clock and closures) are released after the lock.
      _ = withState { state -> LoadableSettings? in
        defer {
          let old = state.extras?.settings
          state.more.settings = LoadableSettings(options: newValue, name: old?.name, instrument: old?.instrument)
        }
        return state.extras?.settings
      }
    }
  }

  /// The name given at creation or with ``named(_:)``, if any; see ``displayName`` for the name
  /// every loadable has.
  public var name: String? {
    get { state.withLock(owner: self) { $0.extras?.settings?.name } }
    set {
      _ = withState { state -> LoadableSettings? in
        defer {
          let old = state.extras?.settings
          state.more.settings = LoadableSettings(options: old?.options, name: newValue, instrument: old?.instrument)
        }
        return state.extras?.settings
      }
    }
  }

  /// Sets ``name`` and returns the loadable, for use in a chain.
  @discardableResult
  public func named(_ name: String) -> Self {
    self.name = name
    return self
  }
}
