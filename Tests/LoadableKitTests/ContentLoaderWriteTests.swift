@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 30: a local write — a value the app already has, set on a key as a load's result would
/// be, under the version rule; a running load it makes stale is superseded (SPEC §5).
@Suite("ContentLoader local writes (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderWriteTests {
  @Test func aWriteOnAKeyNobodyClaimedIsItsValueWithoutALoad() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    #expect(loader.set("edited", version: 3, for: 1))
    let sentinel = loader.begin(99)  // an event after the write's, so a missing one fails at once
    #expect(await events.next() == "loaded(1, edited, 3)")
    sentinel.end()
    let snapshot = loader.snapshot(for: 1)
    #expect(snapshot?.status == .loaded && snapshot?.value == "edited" && snapshot?.version == 3)
    #expect(loader.loadable(for: 1).content == "edited")
    // Loaded and fresh: a claim shows it and does not load.
    let claim = loader.begin(1)
    #expect(claim.snapshot.status == .loaded && claim.snapshot.value == "edited")
    #expect(source.stats.startedPerKey[1] == nil)
    claim.end()
  }

  @Test func aClaimSeesTheWriteAsALoadsResult() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let seen = Recorder<String>()
    let claim = loader.begin(1) { seen.append("\($0.status) \($0.value ?? "-") \($0.version.map(String.init) ?? "-")") }
    await source.waitForStarts(1)
    source.resolve(1, "one", version: 1)
    await eventually { claim.snapshot.status == .loaded }
    #expect(loader.set("edited", version: 2, for: 1))
    await eventually { seen.values.last == "loaded edited 2" }
    #expect(claim.snapshot.value == "edited" && claim.snapshot.version == 2)
    #expect(source.stats.started == 1)
    claim.end()
  }

  @Test func aWriteNotNewerThanTheValueHeldIsRefused() async {
    let source = KeyedSource()
    let loader = makeLoader(source, prior: { _ in ("disk", 5) })
    // Older than, then equal to, the prior value's version.
    #expect(!loader.set("old", version: 4, for: 1))
    #expect(!loader.set("same", version: 5, for: 1))
    #expect(loader.snapshot(for: 1)?.value == "disk" && loader.snapshot(for: 1)?.status == .notLoaded)
    #expect(loader.set("new", version: 6, for: 1))
    #expect(!loader.set("older", version: 5, for: 1))
    #expect(loader.snapshot(for: 1)?.value == "new" && loader.snapshot(for: 1)?.version == 6)
    // A load's result older than the write does not replace it either.
    let claim = loader.begin(1)
    #expect(source.stats.started == 0)
    loader.refresh(1)
    await source.waitForStarts(1)
    source.resolve(1, "stale", version: 6)
    await eventually { claim.snapshot.status == .loaded }
    #expect(claim.snapshot.value == "new" && claim.snapshot.version == 6)
    claim.end()
  }

  @Test func aWriteSupersedesTheRunningLoadAndAnswersItsWaiters() async throws {
    let source = KeyedSource(ignoresCancellation: true)
    let ends = EndCounter()
    let loader = Loader(idleTimeout: nil, instrument: ends, load: { try await source.load($0) })
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    let loadable = loader.loadable(for: 1)
    let fetching = Task { try await loadable.fetch() }
    await eventually { loadable.waiterCount == 1 }
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    #expect(loader.set("edited", version: 2, for: 1))
    // Nobody failed: the caller gets the written value, the claim sees it loaded at once.
    #expect(try await fetching.outcome == "edited")
    #expect(claim.snapshot.status == .loaded && claim.snapshot.value == "edited")
    #expect(await events.next() == "loaded(1, edited, 2)")
    // The superseded load's result, newer though it is, never lands.
    source.resolve(1, "stale", version: 99)
    await eventually { ends.count >= 1 }
    #expect(claim.snapshot.value == "edited" && claim.snapshot.version == 2)
    #expect(loadable.content == "edited")
    #expect(loadable.loadStatus == .loaded)
    // And the key loads again normally.
    loader.refresh(1)
    await source.waitForStarts(2)
    source.resolve(1, "fresh", version: 3)
    #expect(await events.skip(until: "loaded(1, fresh, 3)").allSatisfy { !$0.contains("stale") })
    claim.end()
  }

  @Test func aWriteCancelsTheSupersededLoadsTask() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    loader.set("edited", version: 1, for: 1)
    await source.waitUntil { $0.cancelled == 1 }
    #expect(claim.snapshot.status == .loaded && claim.snapshot.value == "edited")
    claim.end()
    // An idle entry that holds a value: kept, not loading.
    #expect(loader.snapshot(for: 1)?.status == .loaded)
  }
}

extension ContentLoaderWriteTests {
  /// "Idle entries with nothing to show … are on a list of their own and evicted before the
  /// others"; a local write gives one something to show: it is evicted like any idle entry, the
  /// least recently used first. It stayed on the first list and went first, by count and by cost
  /// (a second review of the cache, helper 39).
  @Test func aValueWrittenToAnIdleEntryIsNotEvictedBeforeOlderValuesByCount() async {
    let source = KeyedSource()
    let loader = makeLoader(source, maximumIdleCount: 2)
    await claimLoaded(2, "two", in: loader, from: source).end()  // idle with a value: least recently used
    loader.begin(1).end()  // cancelled before it loaded: idle with nothing to show
    #expect(loader.set("written", version: 1, for: 1))  // now it has a value
    await claimLoaded(3, "three", in: loader, from: source).end()  // a third idle entry: one goes
    #expect(loader.snapshot(for: 1)?.value == "written", "the value just written was evicted")
    #expect(loader.snapshot(for: 2) == nil, "the least recently used entry with a value should go")
  }

  /// The same by cost.
  @Test func aValueWrittenToAnIdleEntryIsNotEvictedBeforeOlderValuesByCost() async {
    let source = KeyedSource()
    let loader = Loader(
      idleTimeout: nil, cost: { $0.count }, totalCostLimit: 10, load: { try await source.load($0) })
    await claimLoaded(2, "22222", in: loader, from: source).end()  // idle, costs 5
    loader.begin(1).end()  // idle with nothing to show
    #expect(loader.set("11111", version: 1, for: 1))  // 10 in all
    await claimLoaded(3, "3", in: loader, from: source).end()  // 11 > 10: the least recently used value goes
    #expect(loader.snapshot(for: 2) == nil, "the least recently used entry with a value should go")
    #expect(loader.snapshot(for: 1)?.value == "11111", "the value just written was evicted")
  }
}
