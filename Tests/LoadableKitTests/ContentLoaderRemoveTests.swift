@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 30: dropping what is cached — one key (its claims load again at once), or every idle
/// entry at once (a memory warning).
@Suite("ContentLoader removal (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderRemoveTests {
  /// Claims `key`, resolves its load with `value`, version `version`; returns the claim.
  static func loaded(_ loader: Loader, _ source: KeyedSource, _ key: Int, _ value: String, version: Int) async -> Loader.Claim {
    let claim = loader.begin(key)
    await source.waitUntil { $0.startedPerKey[key, default: 0] >= 1 && $0.pending >= 1 }
    source.resolve(key, value, version: version, newest: true)
    await eventually { claim.snapshot.status == .loaded }
    return claim
  }

  @Test func removingAnIdleKeyEvictsItAndItsNextClaimStartsOver() async {
    let source = KeyedSource()
    let asked = Counter()
    let loader = makeLoader(source, prior: { _ in asked.increment(); return nil })
    await Self.loaded(loader, source, 1, "one", version: 5).end()
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    loader.remove(1)
    #expect(await events.next() == "evicted(1)")
    #expect(loader.snapshot(for: 1) == nil && loader.count == 0)
    // Starts over: the existingValue hook is asked again, and the key loads.
    let claim = loader.begin(1)
    #expect(claim.snapshot.status == .loading && claim.snapshot.value == nil)
    #expect(asked.count == 2)
    await source.waitForStarts(2)
    claim.end()
  }

  @Test func aClaimedKeyLosesItsValueAndLoadsAgainAtOnce() async {
    let source = KeyedSource()
    let loader = makeLoader(source, prior: { _ in ("disk", 1) })
    let claim = await Self.loaded(loader, source, 1, "one", version: 5)
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    loader.remove(1)
    #expect(claim.snapshot.status == .loading && claim.snapshot.value == nil && claim.snapshot.version == nil)
    #expect(await events.next() == "loading(1)")
    await source.waitForStarts(2)
    // The versions went with the value: an older version than the removed one is taken.
    source.resolve(1, "two", version: 2)
    await eventually { claim.snapshot.status == .loaded }
    #expect(claim.snapshot.value == "two" && claim.snapshot.version == 2)
    claim.end()
  }

  @Test func aRunningLoadIsSupersededAndItsWaitersGetTheFreshOne() async throws {
    let source = KeyedSource(ignoresCancellation: true)
    let ends = EndCounter()
    let loader = Loader(idleTimeout: nil, instrument: ends, load: { try await source.load($0) })
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    let loadable = loader.loadable(for: 1)
    let fetching = Task { try await loadable.fetch() }
    await eventually { loadable.waiterCount == 1 }
    loader.remove(1)
    await source.waitForStarts(2)
    source.resolve(1, "stale", version: 99)  // the superseded load's result: dropped
    await eventually { ends.count >= 1 }
    #expect(claim.snapshot.status == .loading && claim.snapshot.value == nil)
    source.resolve(1, "fresh", version: 1)
    #expect(try await fetching.outcome == "fresh")
    #expect(claim.snapshot.value == "fresh")
    claim.end()
  }

  @Test func aRemovedKeysLoadCancelledByItsClaimsEndingRestoresNothing() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = await Self.loaded(loader, source, 1, "one", version: 1)
    loader.refresh(1)
    await source.waitForStarts(2)
    loader.remove(1)  // supersedes the refresh
    claim.end()  // cancels the fresh load: the key goes back to before it — without "one"
    let snapshot = loader.snapshot(for: 1)
    #expect(snapshot?.value == nil && snapshot?.status == .notLoaded)
    #expect(loader.loadable(for: 1).content == nil)
  }

  @Test func removeAllIdleEvictsEveryIdleEntryAndKeepsClaimedAndLoadingOnes() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    for key in 0..<2 { await Self.loaded(loader, source, key, "v\(key)", version: 1).end() }
    loader.begin(2).end()  // idle with nothing to show
    let kept = await Self.loaded(loader, source, 3, "v3", version: 1)
    let loading = loader.begin(4)
    #expect(loader.count == 5)
    #expect(loader.removeAllIdle() == 3)
    #expect(loader.count == 2)
    #expect((0..<3).allSatisfy { loader.snapshot(for: $0) == nil })
    #expect(loader.snapshot(for: 3)?.value == "v3")
    #expect(loader.snapshot(for: 4)?.status == .loading)
    kept.end()
    loading.end()
  }
}
