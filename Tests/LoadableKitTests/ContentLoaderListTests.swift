@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("ContentLoader for real lists (issue 15)", .timeLimit(.minutes(1)))
struct ContentLoaderListTests {
  /// Thumbnails defect: idle entries with nothing to show counted toward `maximumIdleCount`, so a
  /// fling — many keys claimed and dropped before they loaded — evicted the real thumbnails.
  @Test func aFlingDoesNotEvictIdleEntriesThatHoldValues() async {
    let source = KeyedSource()
    let loader = makeLoader(source, maximumIdleCount: 2)
    for key in 0..<2 { await claimLoaded(key, "v\(key)", in: loader, from: source).end() }
    for key in 100..<120 { loader.begin(key).end() }  // the fling: nothing loaded
    #expect(loader.snapshot(for: 0)?.value == "v0")
    #expect(loader.snapshot(for: 1)?.value == "v1")
    #expect(loader.count == 2)
  }

  @Test func refreshWhereReloadsTheClaimedKeysThePredicateChooses() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claims = (0..<4).map { loader.begin($0) }
    await source.waitUntil { $0.pending == 4 }
    for key in 0..<4 { source.resolve(key, "v\(key)", version: 1) }
    await eventually { (0..<4).allSatisfy { loader.snapshot(for: $0)?.status == .loaded } }
    loader.refresh(where: { $0 % 2 == 0 })
    await source.waitUntil { $0.pending == 2 }
    #expect(source.stats.startedPerKey == [0: 2, 1: 1, 2: 2, 3: 1])
    // The current value stays on screen meanwhile.
    #expect(loader.snapshot(for: 0)?.value == "v0" && loader.snapshot(for: 0)?.status == .loading)
    source.resolve(0, "w0", version: 2)
    source.resolve(2, "w2", version: 2)
    await eventually { loader.snapshot(for: 2)?.value == "w2" }
    for claim in claims { claim.end() }
  }

  @Test func invalidateWhereMarksStaleWithoutLoadingUntilTheNextClaim() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    source.resolve(1, "one", version: 1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    loader.invalidate(where: { $0 == 1 })
    #expect(source.stats.started == 1 && loader.snapshot(for: 1)?.status == .loaded)
    claim.end()
    let next = loader.begin(1)  // the next first claim loads
    await source.waitForStarts(2)
    #expect(next.snapshot.status == .loading && next.snapshot.value == "one")
    source.resolve(1, "two", version: 2)
    await eventually { next.snapshot.value == "two" }
    // The key's loadable saw the mark too: fetchIfNeeded loads after an invalidation.
    loader.invalidate(where: { _ in true })
    let fetch = Task { try await loader.loadable(for: 1).fetchIfNeeded() }
    await source.waitForStarts(3)
    source.resolve(1, "three", version: 3)
    #expect(try await fetch.outcome == "three")
    next.end()
  }

  @Test func aValueOlderThanStaleAfterIsShownAndRefreshedAtTheNextClaim() async throws {
    let source = KeyedSource()
    let clock = TestClock()
    let loader = Loader(
      staleAfter: .seconds(60), clock: clock, load: { try await source.load($0) })
    let first = loader.begin(1)
    await source.waitForStarts(1)
    source.resolve(1, "one", version: 1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    first.end()

    await clock.advance(by: .seconds(59))
    loader.begin(1).end()  // fresh: no load
    #expect(source.stats.started == 1)
    #expect(try await loader.loadable(for: 1).fetchIfNeeded() == "one")

    await clock.advance(by: .seconds(1))
    let stale = loader.begin(1)  // stale: shown at once, and refreshed
    #expect(stale.snapshot.status == .loading && stale.snapshot.value == "one")
    await source.waitForStarts(2)
    source.resolve(1, "two", version: 2)
    await eventually { stale.snapshot.value == "two" }
    stale.end()
    // The age counts from the end of the load: fresh again.
    loader.begin(1).end()
    #expect(source.stats.started == 2)
    // The loadable sees the age too.
    await clock.advance(by: .seconds(60))
    let fetch = Task { try await loader.loadable(for: 1).fetchIfNeeded() }
    await source.waitForStarts(3)
    source.resolve(1, "three", version: 3)
    #expect(try await fetch.outcome == "three")
  }

  @Test func idleEntriesBeyondTheTotalCostAreEvictedLeastRecentlyUsedFirst() async {
    let source = KeyedSource()
    let loader = Loader(
      idleTimeout: nil, cost: { $0.count }, totalCostLimit: 10, load: { try await source.load($0) })
    var events = Reader(loader.events)
    var claims: [Loader.Claim] = []
    for key in 0..<3 { claims.append(await claimLoaded(key, "four", in: loader, from: source)) }  // each costs 4
    // 12 > 10, but every entry is claimed: nothing can go.
    #expect(loader.count == 3)
    claims[1].end()
    claims[0].end()  // 1 is the least recently used idle entry
    #expect(await events.skip(until: event(.evicted(1))).allSatisfy { !$0.hasPrefix("evicted") })
    #expect(loader.count == 2 && loader.snapshot(for: 0)?.value == "four")
    claims[2].end()
    #expect(loader.count == 2)
  }

  /// A prior value (the `existingValue` hook's) shown by an idle entry costs what `cost` says,
  /// like a loaded value.
  @Test func idlePriorValuesCountTowardTheTotalCost() async {
    let source = KeyedSource()
    let loader = Loader(
      idleTimeout: nil, cost: { $0.count }, totalCostLimit: 10,
      existingValue: { _ in ("cached", 0) },  // costs 6
      load: { try await source.load($0) })
    var events = Reader(loader.events)
    loader.begin(0).end()  // its load cancelled: back to its prior value, idle
    #expect(loader.count == 1 && loader.snapshot(for: 0)?.value == "cached")
    loader.begin(1).end()  // 6 + 6 > 10: the least recently used goes
    #expect(await events.skip(until: event(.evicted(0))).allSatisfy { !$0.hasPrefix("evicted") })
    #expect(loader.count == 1 && loader.snapshot(for: 1)?.value == "cached")
  }

  /// Over the total cost, idle entries with nothing to show are evicted first (as
  /// `totalCostLimit` documents), then the least recently used with a value: a failed key that
  /// went idle goes with the value that has to go, in the same step.
  @Test func overTheTotalCostIdleEntriesWithNothingToShowGoFirst() async {
    let source = KeyedSource()
    let loader = Loader(
      idleTimeout: nil, cost: { $0.count }, totalCostLimit: 10, load: { try await source.load($0) })
    let failing = loader.begin(9)
    await source.waitUntil { $0.pending == 1 }
    source.fail(9, Boom())
    await eventually { loader.snapshot(for: 9)?.status == .failed }
    failing.end()  // idle, with nothing to show
    await claimLoaded(0, "sixsix", in: loader, from: source).end()  // costs 6; idle: 6 of 10
    let claim = await claimLoaded(1, "sixsix", in: loader, from: source)
    // Key 1's value makes 12 > 10: the idle entries go, the one with nothing to show first.
    await eventually { loader.snapshot(for: 0) == nil }
    #expect(loader.snapshot(for: 9) == nil, "the failed idle key was evicted before the value")
    #expect(loader.count == 1 && loader.snapshot(for: 1)?.value == "sixsix")
    claim.end()
  }

  /// Thumbnails defect: a claim that ends very soon after it begins could miss its first
  /// snapshot, when another thread was delivering notifications at that moment.
  @Test func aClaimEndedBeforeItsFirstSnapshotWasDeliveredStillGetsIt() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let inHandler = AsyncGate()
    let release = AsyncGate()
    let blocking = Atomic<Bool>(false)
    // A handler that, once armed, keeps the delivery role busy until released.
    let busy = loader.begin(0) { _ in
      if blocking.exchange(false, ordering: .relaxed) {
        inHandler.open()
        release.waitBlocking()
      }
    }
    blocking.store(true, ordering: .relaxed)
    let deliverer = Task.detached { await source.waitForStarts(1); source.resolve(0, "zero", version: 1) }
    // Another thread is delivering now. Bounded: a handler that never runs fails the test here
    // instead of holding the suite forever (mutant 63).
    await eventually { inHandler.isOpen }
    let seen = Recorder<String>()
    let quick = loader.begin(1) { seen.append("\($0.status)") }
    quick.end()  // ends before its first snapshot could be delivered
    release.open()
    await deliverer.value
    await eventually { seen.count == 1 }
    #expect(seen.values == ["loading"])
    busy.end()
  }

}

private func event(_ event: Loader.Event) -> String { "\(event)" }

/// A one-shot gate a test opens once: the test polls it (``isOpen``, in a bounded `eventually`),
/// and a thread that must not return (a handler holding the delivery role) spins on it.
final class AsyncGate: Sendable {
  private let condition = Atomic<Bool>(false)

  func open() { condition.store(true, ordering: .releasing) }

  var isOpen: Bool { condition.load(ordering: .acquiring) }

  /// Spins until opened; for a synchronous handler on a thread of its own.
  func waitBlocking() {
    while !condition.load(ordering: .acquiring) {}
  }
}
