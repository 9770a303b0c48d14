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
}
