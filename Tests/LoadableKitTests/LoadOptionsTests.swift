@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("Retry policy and timeout", .timeLimit(.minutes(1)))
struct LoadOptionsTests {
  @Test func backoffGrowsAndIsCappedStepByStep() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 4, initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(3), jitter: 0),
      clock: clock)
    let fetch = Task { try await loadable.fetch() }
    var expectedDeadline = Duration.zero
    for (try_, delay) in [(1, Duration.seconds(1)), (2, .seconds(2)), (3, .seconds(3))] {
      try await control.waitForStart(try_)
      control.fail(Boom(code: try_))
      try await clock.waitForSleepers(1)
      expectedDeadline += delay
      #expect(clock.pendingDeadlines == [TestClock.Instant(offset: expectedDeadline)])
      #expect(loadable.loadStatus == .loading, "retries happen inside one attempt")
      await clock.advance(by: delay)
    }
    try await control.waitForStart(4)
    control.resolve(9)
    #expect(try await fetch.value == 9)
    #expect(control.startCount == 4)
  }

  @Test func exhaustedRetriesFailWithTheLastError() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), clock: clock)
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Boom(code: 1))
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(1))
    try await control.waitForStart(2)
    control.fail(Boom(code: 2))
    await #expect(throws: Boom(code: 2)) { try await load.value }
    #expect(clock.sleeperCount == 0)
  }

  @Test func errorsThePredicateRejectsAreNotRetried() async throws {
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 5, shouldRetry: { ($0 as? Boom)?.code != 401 }), clock: TestClock())
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Boom(code: 401))
    await #expect(throws: Boom(code: 401)) { try await load.value }
    #expect(control.startCount == 1)
  }

  @Test func aTimeoutCancelsTheWorkAndFailsWithTimedOut() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(timeout: .seconds(5), clock: clock)
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(5))])
    await clock.advance(by: .seconds(4))
    #expect(loadable.loadStatus == .loading)
    await clock.advance(by: .seconds(1))
    await #expect(throws: LoadableError.timedOut) { try await load.value }
    #expect(control.cancelledCount == 1, "the work was cancelled")
    #expect(loadable.loadError as? LoadableError == .timedOut)
  }

  @Test func aTimedOutTryIsRetried() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), timeout: .seconds(10), clock: clock)
    let fetch = Task { try await loadable.fetch() }
    try await control.waitForStart()
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(10))  // the first try times out
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(1))  // backoff
    try await control.waitForStart(2)
    control.resolve(3)
    #expect(try await fetch.value == 3)
    #expect(control.cancelledCount == 1)
  }

  @Test func jitterTakesOffAtMostItsFraction() {
    let policy = RetryPolicy(initialDelay: .seconds(10), multiplier: 2, maxDelay: .seconds(60), jitter: 0.2, random: { 0.5 })
    #expect(policy.delay(beforeRetry: 1) == .seconds(9))
    #expect(policy.delay(beforeRetry: 2) == .seconds(18))
    #expect(policy.delay(beforeRetry: 10) == .seconds(54))
    let noJitter = RetryPolicy(initialDelay: .seconds(1), jitter: 0)
    #expect(noJitter.delay(beforeRetry: 3) == .seconds(4))
  }

  /// A test clock advanced by the delay the policy names wakes the retry: the delay was 40
  /// attoseconds longer than 300 ms (through `Double` seconds; helper 37), and 32 longer than 1.1 s
  /// (through `Duration * Double`; helper 38), and the retry waited for ever.
  @Test(arguments: [Duration.milliseconds(300), .seconds(1.1)])
  func aRetryWaitsExactlyItsBackoffDelayOnTheClock(_ delay: Duration) async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: delay, multiplier: 2, jitter: 0),
      clock: clock)
    let load = Task { try await loadable.fetch() }
    try await control.waitForStart()
    control.fail(Boom(code: 1))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: delay)])
    await clock.advance(by: delay)
    #expect(clock.sleeperCount == 0, "\(delay) passed: the backoff before the first retry is over")
    await clock.run()  // lets the test end either way
    try await control.waitForStart(2)
    control.resolve(5)
    #expect(try await load.outcome == 5)
  }

  /// A timeout runs `performLoad()` in a child task (raced against the clock); it is still the
  /// attempt's work: a direct `load()` it makes is the attempt's wait (an edge of the wait-for
  /// graph, so a load of itself is a cycle, not a hang until the timeout) and its dependency (so
  /// `cancelLoad()` reaches it). With a timeout, the self-load failed `timedOut` and the cancel left
  /// the dependency loading (found by a second review, helper 37).
  @Test(arguments: [false, true])
  func aDirectLoadOfItselfIsACycleWithOrWithoutATimeout(timeout: Bool) async throws {
    let clock = TestClock()
    let reference = Mutex<AsyncLoadable<Int>?>(nil)
    let loadable = AsyncLoadable<Int> {
      try await reference.withLock { $0 }!.load()  // a direct load() on the attempt's task: a cycle
      return 1
    }
    reference.withLock { $0 = loadable }
    if timeout { loadable.loadOptions = LoadOptions(timeout: .seconds(5), clock: clock) }
    let load = Task { try await loadable.load() }
    // Were the cycle missed, the load would wait for the timeout: this ends that wait.
    let mover = Task {
      try await clock.waitForSleepers(1)
      for _ in 0..<1_000 where loadable.loadStatus == .loading { await Task.yield() }
      await clock.advance(by: .seconds(5))
    }
    defer { mover.cancel() }
    do {
      try await load.outcome
      Issue.record("loaded")
    } catch let error as LoadableError {
      #expect(error.code == .dependencyCycle, "\(error)")
    }
  }

  @Test(arguments: [false, true])
  func cancelLoadReachesADependencyItsAttemptLoadedDirectly(timeout: Bool) async throws {
    let control = ControlledLoad<Int>()
    let dependency = control.makeLoadable()
    let dependent = AsyncLoadable<Int> {
      try await dependency.load()
      return 1
    }
    if timeout { dependent.loadOptions = LoadOptions(timeout: .seconds(5), clock: TestClock()) }
    let load = Task { try await dependent.load() }
    try await control.waitForStart()
    dependent.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.outcome }
    await eventually { dependency.loadStatus != .loading }
    #expect(dependency.loadStatus == .notLoaded, "the attempt the dependent started still runs")
    while control.resolve(0) {}
  }
}
