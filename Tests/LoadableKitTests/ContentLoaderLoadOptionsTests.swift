@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// An answer such as HTTP `503 Service Unavailable` with `Retry-After`.
private struct Unavailable: RetryAfterError {
  var retryAfter: Duration?
}

/// Issue 30: `LoadOptions` for a loader's keys — retry policy with backoff and `Retry-After`, and
/// a timeout — the same type and semantics as `AsyncLoadable`'s.
@Suite("ContentLoader load options (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderLoadOptionsTests {
  private func makeLoader(_ source: KeyedSource, _ options: LoadOptions, limit: Int? = nil) -> Loader {
    Loader(idleTimeout: nil, maximumConcurrentLoads: limit, loadOptions: options, load: { try await source.load($0) })
  }

  @Test func aFailedTryIsRetriedAfterTheBackoffWithinTheSameLoad() async throws {
    let clock = TestClock()
    let source = KeyedSource()
    let loader = makeLoader(
      source, LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), clock: clock))
    let seen = Recorder<LoadStatus>()
    let claim = loader.begin(1) { seen.append($0.status) }
    await source.waitForStarts(1)
    source.fail(1, Boom())
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(1))])
    #expect(claim.snapshot.status == .loading)
    await clock.advance(by: .seconds(1))
    await source.waitForStarts(2)
    source.resolve(1, "one", version: 1)
    await eventually { claim.snapshot.status == .loaded }
    #expect(claim.snapshot.value == "one")
    #expect(!seen.values.contains(.failed), "the claim never saw the failed try")
    claim.end()
  }

  @Test func theRetryWaitsForTheDelayTheErrorAsksFor() async throws {
    let clock = TestClock()
    let source = KeyedSource()
    let loader = makeLoader(
      source, LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(100), jitter: 0), clock: clock),
      limit: 1)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    source.fail(1, Unavailable(retryAfter: .seconds(7)))
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(7))], "the server's delay, not the backoff's")
    // No slot is held during the backoff: another key loads meanwhile.
    let other = loader.begin(2)
    await source.waitUntil { $0.startedPerKey[2] == 1 }
    source.resolve(2, "two", version: 1)
    await eventually { other.snapshot.status == .loaded }
    await clock.advance(by: .seconds(7))
    await source.waitUntil { $0.startedPerKey[1] == 2 }
    source.resolve(1, "one", version: 1)
    await eventually { claim.snapshot.status == .loaded }
    claim.end()
    other.end()
  }

  @Test func aLoadThatOutlastsTheTimeoutFails() async throws {
    let clock = TestClock()
    let source = KeyedSource()
    let loader = makeLoader(source, LoadOptions(timeout: .seconds(5), clock: clock))
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(5))
    await eventually { claim.snapshot.status == .failed }
    #expect((claim.snapshot.error as? LoadableError) == .timedOut)
    // The work was cancelled, and the key loads again at its next first claim.
    await source.waitUntil { $0.cancelled == 1 }
    claim.end()
    let again = loader.begin(1)
    await source.waitForStarts(2)
    again.end()
  }

  /// Under a timeout a key's load runs in a child task, where no attempt is the current task's:
  /// it must still know which attempt it belongs to. A refresh supersedes the key's load after
  /// its task has started the timeout's child but before that child runs: the superseded load's
  /// interim value and result must reach nothing (it took itself for the fresh load), and the
  /// fresh one must land.
  @Test func aLoadSupersededBeforeItsTimeoutChildRanShowsNothing() async throws {
    let executor = ManualTaskExecutor()
    let calls = Mutex(0)
    let interimShown = Recorder<Bool>()
    let seen = Recorder<String>()
    let loader = ContentLoader<Int, String, Int>(
      idleTimeout: nil, loadOptions: LoadOptions(timeout: .seconds(60), clock: TestClock()), taskExecutor: executor
    ) { _, interim in
      let call = calls.withLock { count in
        count += 1
        return count
      }
      guard call == 1 else { return ("fresh", 3) }
      interimShown.append(interim.deliver("stale interim", version: 9))
      return ("stale", 5)
    }
    let claim = loader.begin(1) { if let value = $0.value { seen.append(value) } }
    #expect(executor.runInOrder(maxSteps: 1) == 1)  // the attempt's task: it starts the timeout's children
    #expect(calls.withLock { $0 } == 0)
    loader.refresh(1)  // supersedes the load whose child has not run yet
    executor.runInOrder()
    #expect(calls.withLock { $0 } == 2)
    #expect(interimShown.values == [false], "the superseded load's interim value was shown")
    #expect(claim.snapshot.status == .loaded)
    #expect(claim.snapshot.value == "fresh" && claim.snapshot.version == 3, "\(claim.snapshot)")
    #expect(seen.values.allSatisfy { $0 == "fresh" }, "the superseded load reached the claim: \(seen.values)")
    claim.end()
    executor.runInOrder()
  }
}
