@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

private struct AskedAfter: RetryAfterError {
  var retryAfter: Duration?
}

/// Load options at their edges: a Retry-After under a negative maximum, a delay rounded past its
/// maximum, a timeout reported for a dependent that had none, retries counted before they ran, an
/// incidental dependency retried on every try.
@Suite("Load options at the edges", .timeLimit(.minutes(1)))
struct LoadOptionsEdgeTests {
  /// Backoff.init: "Negative durations count as zero." RetryPolicy.delay(beforeRetry:after:):
  /// "nil when the delay asked for is longer than maxDelay". A maxDelay of -1 s counts as zero, and
  /// an error asking for zero delay asks for nothing longer than that.
  @Test func aZeroRetryAfterUnderANegativeMaxDelayIsStillRetried() {
    let policy = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(-1), jitter: 0)
    #expect(policy.delay(beforeRetry: 1) == .zero, "the negative maximum counts as zero")
    #expect(policy.delay(beforeRetry: 1, after: AskedAfter(retryAfter: .zero)) == .zero)
    #expect(policy.delay(beforeRetry: 1, after: AskedAfter(retryAfter: .seconds(-3))) == .zero)
  }

  /// Backoff.delay(forAttempt:): "Never negative and never more than maximum". The cap is
  /// compared in `Double` seconds, which round the product down below it, and the exact product,
  /// 13 attoseconds over the maximum, is returned: a test clock advanced by `maxDelay` does not
  /// wake that retry.
  @Test func aDelayIsNeverMoreThanTheMaximum() {
    let initial = Duration(secondsComponent: 2, attosecondsComponent: 450_180_861_881_521_465)
    let maximum = Duration(secondsComponent: 7, attosecondsComponent: 350_542_585_644_564_382)
    let backoff = Backoff(initial: initial, multiplier: 3, maximum: maximum)
    #expect(backoff.delay(forAttempt: 2) <= maximum, "\(backoff.delay(forAttempt: 2).components)")
    let policy = RetryPolicy(initialDelay: initial, multiplier: 3, maxDelay: maximum, jitter: 0)
    #expect(policy.delay(beforeRetry: 2) <= maximum)
  }

  /// LoadAttempt.Outcome.timedOut: "Its last try exceeded the LoadOptions/timeout." A dependent
  /// with no timeout, whose performLoad() never ran, did not time out: it failed with its
  /// dependency's error.
  @Test func aDependentWithoutATimeoutIsNotReportedTimedOut() async throws {
    let recorder = RecordingInstrument()
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let table = control.makeLoadable().named("table")
    table.loadOptions = LoadOptions(timeout: .seconds(5), clock: clock)
    let layer = AsyncLoadable<Int>(name: "layer") { 1 }
    layer.addDependency(table)
    table.instrument = recorder
    layer.instrument = recorder
    let load = Task { try await layer.load() }
    try await control.waitForStart()
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(5))
    await #expect(throws: LoadableError.timedOut) { try await load.value }
    await eventually { recorder.ends.count == 2 }
    #expect(recorder.ends(named: "table").map { "\($0.outcome)" } == ["timedOut"])
    #expect(
      recorder.ends(named: "layer").map { "\($0.outcome)" }.allSatisfy { $0.hasPrefix("failed") },
      "\(recorder.ends(named: "layer").map { "\($0.outcome)" })")
  }

  /// LoadAttempt.End.retries: "How many times the RetryPolicy tried performLoad() again within
  /// it." An attempt cancelled during its first backoff never tried performLoad() again.
  @Test func anAttemptCancelledInItsBackoffCountsNoRetry() async throws {
    let recorder = RecordingInstrument()
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable().named("counted")
    loadable.instrument = recorder
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), jitter: 0), clock: clock)
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Boom(code: 1))
    try await clock.waitForSleepers(1)
    loadable.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.value }
    await eventually { recorder.ends.count == 1 }
    #expect(control.startCount == 1, "performLoad() ran once")
    #expect(recorder.ends.first?.end.retries == 0, "performLoad() was never tried again")
  }

  /// SPEC §2: "Within one attempt each dependency is loaded with the intent once"; a dependency
  /// that is not an AsyncLoadable gets retryLoad() for a retry. An attempt of retryLoad() whose
  /// performLoad() starts the same incidental dependency on each of its tries (its RetryPolicy)
  /// retries that dependency on every try.
  @Test func anIncidentalDependencyIsRetriedOncePerAttemptAcrossItsTries() async throws {
    let clock = TestClock()
    let other = CountingLoadable()
    let owner = LockOwner()
    let tries = Mutex(0)
    let reference = Mutex<AsyncLoadable<Int>?>(nil)
    let dependent = AsyncLoadable<Int> {
      let loadable = reference.withLock(owner: owner) { $0 }!
      loadable.startIncidentalDependency(other)
      let n = tries.withLock(owner: owner) { count -> Int in
        count += 1
        return count
      }
      if n < 3 { throw Boom(code: n) }  // the first attempt's only try, then the retry's first try
      return n
    }
    reference.withLock(owner: owner) { $0 = dependent }
    await #expect(throws: Boom(code: 1)) { try await dependent.load() }  // fails: now retry it
    await eventually { other.loads == 1 }
    dependent.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), clock: clock)
    let retry = Task { try await dependent.retryLoad() }
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(1))
    try await retry.value
    await eventually { other.loads + other.retries == 3 }
    for _ in 0..<1_000 { await Task.yield() }
    #expect(other.retries == 1, "retried on each try of one attempt: \(other.retries)")
    reference.withLock(owner: owner) { $0 = nil }
  }
}

private final class CountingLoadable: Loadable {
  private let counts = Mutex<(loads: Int, retries: Int)>((0, 0))
  var loads: Int { counts.withLock(owner: self) { $0.loads } }
  var retries: Int { counts.withLock(owner: self) { $0.retries } }
  var loadStatus: LoadStatus { .failed }
  var loadError: (any Error)? { Boom(code: 9) }
  func load() async throws {
    counts.withLock(owner: self) { $0.loads += 1 }
    throw Boom(code: 9)
  }
  func retryLoad() async throws {
    counts.withLock(owner: self) { $0.retries += 1 }
    throw Boom(code: 9)
  }
  func cancelLoad() {}
}
