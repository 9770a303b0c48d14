import Synchronization

/// Reports one attempt to the instruments that were installed when it started.
///
/// Made only when some instrument is installed (``LoadInstrumentation/isActive``), so an
/// uninstrumented attempt costs one atomic load and no allocation. Every report is made outside
/// every lock.
final class AttemptProbe: Sendable {
  let attempt: LoadAttempt
  private let instruments: [any LoadInstrument]
  private let retries = Atomic<Int>(0)
  /// Whether the last try ended by the attempt's own ``LoadOptions/timeout`` (not by a
  /// dependency's `timedOut` error that bubbled up).
  private let lastTryTimedOut = Atomic<Bool>(false)

  private init(attempt: LoadAttempt, instruments: [any LoadInstrument]) {
    self.attempt = attempt
    self.instruments = instruments
  }

  /// Reports that `loadable` started the attempt `id` with `intent`, for the attempt `parent`
  /// when a dependent's attempt asked for it. Returns `nil`, having reported nothing, when no
  /// instrument hears of this loadable.
  static func start<Content>(
    _ loadable: AsyncLoadable<Content>, id: UInt64, intent: LoadIntent, parent: AttemptContext?
  ) -> AttemptProbe? {
    guard LoadInstrumentation.isActive else { return nil }
    let own = loadable.ownInstrument ?? (loadable as? any InheritsInstrument)?.inheritedInstrument
    let instruments = LoadInstrumentation.instruments(own: own)
    guard !instruments.isEmpty else { return nil }
    let attempt = LoadAttempt(
      id: LoadAttempt.ID(rawValue: id), name: loadable.displayName, intent: LoadAttempt.Intent(intent),
      parent: parent.flatMap { $0.attemptID == 0 ? nil : LoadAttempt.ID(rawValue: $0.attemptID) }, startedAt: .now)
    let probe = AttemptProbe(attempt: attempt, instruments: instruments)
    LoadInstrumentation.tell(instruments) { instrument in instrument.attemptStarted(attempt) }
    return probe
  }

  /// The retry policy is about to try again (after `delay`).
  func retrying(number: Int, error: any Error, delay: Duration) {
    lastTryTimedOut.store(false, ordering: .relaxed)
    let retry = LoadAttempt.Retry(number: number, error: error, delay: delay)
    LoadInstrumentation.tell(instruments) { instrument in instrument.attemptRetrying(attempt, retry) }
  }

  /// The retry policy tries again now: its backoff is over (one cancelled during it is no retry).
  func retried() {
    retries.add(1, ordering: .relaxed)
  }

  /// A try of the attempt's work exceeded the attempt's own timeout.
  func tryTimedOut() {
    lastTryTimedOut.store(true, ordering: .relaxed)
  }

  /// The attempt's task returned `result`; `current` tells whether the result was used (a
  /// cancelled attempt's is dropped), `callers` how many waited for it.
  func end<Content>(with result: Result<Content, any Error>, current: Bool, callers: Int) {
    let outcome: LoadAttempt.Outcome =
      switch result {
      case _ where !current: .cancelled
      case .success: .loaded
      case .failure(let error as LoadableError)
      where error.code == .timedOut && lastTryTimedOut.load(ordering: .relaxed):
        .timedOut
      case .failure(is CancellationError): .cancelled
      case .failure(let error): .failed(error)
      }
    let end = LoadAttempt.End(
      outcome: outcome, duration: attempt.startedAt.duration(to: .now),
      retries: retries.load(ordering: .relaxed), callers: callers)
    LoadInstrumentation.tell(instruments) { instrument in instrument.attemptEnded(attempt, end) }
  }
}

extension LoadAttempt.Intent {
  init(_ intent: LoadIntent) {
    switch intent {
    case .load: self = .load
    case .retry: self = .retry
    case .refresh: self = .refresh
    case .ifNeeded: self = .ifNeeded
    }
  }
}

extension LoadStateMachine {
  /// What an attempt's end report needs from the state, read under the lock before `finish`.
  func instrumentationFacts(for attempt: Attempt) -> (current: Bool, callers: Int) {
    (self.attempt === attempt, attempt.joinedCount)
  }
}

/// A loadable that hears through its owner's instrument when it has none of its own: a
/// ``ContentLoader`` key's loadable uses the loader's.
protocol InheritsInstrument: AnyObject {
  var inheritedInstrument: (any LoadInstrument)? { get }
}

extension ContentLoader.KeyedLoadable: InheritsInstrument {
  var inheritedInstrument: (any LoadInstrument)? { loader?.instrument }
}
