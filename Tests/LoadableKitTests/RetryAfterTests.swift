import LoadableKit
import LoadableKitTesting
import Testing

/// An answer such as HTTP `503 Service Unavailable` with `Retry-After`.
private struct Unavailable: RetryAfterError, Equatable {
  var retryAfter: Duration?
}

@Suite("Retry-After", .timeLimit(.minutes(1)))
struct RetryAfterTests {
  private func makeLoadable(
    _ control: ControlledLoad<Int>, clock: TestClock, policy: RetryPolicy
  ) -> AsyncLoadable<Int> {
    let loadable = control.makeLoadable()
    loadable.loadOptions = LoadOptions(retryPolicy: policy, clock: clock)
    return loadable
  }

  @Test func theRetryWaitsForTheDelayTheErrorAsksFor() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = makeLoadable(
      control, clock: clock, policy: RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(100), jitter: 0))
    let fetch = Task { try await loadable.fetch() }
    try await control.waitForStart()
    control.fail(Unavailable(retryAfter: .seconds(7)))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(7))], "the server's delay, not the backoff's")
    await clock.advance(by: .seconds(6))
    #expect(control.startCount == 1, "not retried before the delay asked for")
    await clock.advance(by: .seconds(1))
    try await control.waitForStart(2)
    control.resolve(5)
    #expect(try await fetch.value == 5)
  }

  @Test func aShorterRetryAfterThanTheBackoffWaitsForTheBackoff() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = makeLoadable(
      control, clock: clock, policy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(2), jitter: 0))
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Unavailable(retryAfter: .milliseconds(500)))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(2))])
    await clock.advance(by: .seconds(2))
    try await control.waitForStart(2)
    control.resolve(1)
    try await load.value
  }

  @Test func anErrorWithoutADelayUsesTheBackoff() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = makeLoadable(
      control, clock: clock, policy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(3), jitter: 0))
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Unavailable(retryAfter: nil))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(3))])
    await clock.advance(by: .seconds(3))
    try await control.waitForStart(2)
    control.resolve(1)
    try await load.value
  }

  @Test func aDelayLongerThanMaxDelayEndsTheRetries() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = makeLoadable(
      control, clock: clock,
      policy: RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(30), jitter: 0))
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Unavailable(retryAfter: .seconds(3600)))
    await #expect(throws: Unavailable(retryAfter: .seconds(3600))) { try await load.value }
    #expect(control.startCount == 1, "an hour is longer than the policy waits: the error is thrown at once")
    #expect(clock.sleeperCount == 0)
  }

  @Test func aPolicyThatIgnoresRetryAfterUsesItsBackoff() async throws {
    let clock = TestClock()
    let control = ControlledLoad<Int>()
    let loadable = makeLoadable(
      control, clock: clock,
      policy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0, honorsRetryAfter: false))
    let load = Task { try await loadable.load() }
    try await control.waitForStart()
    control.fail(Unavailable(retryAfter: .seconds(9)))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(1))])
    await clock.advance(by: .seconds(1))
    try await control.waitForStart(2)
    control.resolve(1)
    try await load.value
  }

  @Test func theDelayIsReadFromTheError() {
    let policy = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(10), jitter: 0)
    #expect(policy.delay(beforeRetry: 1, after: Unavailable(retryAfter: .seconds(4))) == .seconds(4))
    #expect(policy.delay(beforeRetry: 1, after: Unavailable(retryAfter: nil)) == .seconds(1))
    #expect(policy.delay(beforeRetry: 1, after: Unavailable(retryAfter: .seconds(11))) == nil)
    #expect(policy.delay(beforeRetry: 1, after: Unavailable(retryAfter: .seconds(-3))) == .seconds(1), "a negative delay is no delay")
  }
}
