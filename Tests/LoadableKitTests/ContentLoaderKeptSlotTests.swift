@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The slots of `maximumConcurrentLoads` kept for a load whose task has not come, and a load's rank
/// as its demand comes and goes (LoadingKeyedContent, "A limit on loads"; SPEC §5). Found by a
/// second review of the limit (helper 41); each test failed before its fix.
@Suite("ContentLoader: kept slots, and ranks as demand goes", .timeLimit(.minutes(1)))
struct ContentLoaderKeptSlotTests {
  /// "A task that finds every slot taken takes it if the load it was kept for is not more urgent":
  /// also a task whose claim reserved its place in the queue. Key 2's place was reserved (claimed)
  /// before the slot was kept for key 1, and its task came after: it waits in the queue while the
  /// kept slot's load (key 1) waits for key 2.
  @Test func aReservedPlacesTaskBorrowsAKeptSlotThatIsNotMoreUrgent() async throws {
    let keys = await KeyOneWaitsForKeyTwo(key2WaitsForSlow: true)
    let first = keys.loader.begin(1)  // visible: a place in the queue; its task loads its dependency first
    let second = keys.loader.begin(2)  // visible: a place behind it; its task comes once `slow` opens
    await eventually { keys.loader.limiter!.waitingCount == 2 }
    await keys.keepTheSlotForKeyOne()  // first among equals
    keys.late.open()  // key 1's dependency waits for key 2
    keys.slow.open()  // key 2's task comes for its place: every slot taken, the kept one's load as urgent
    #expect(await keys.keyTwoStarts(), "key 2 never started: key 1 keeps the slot and waits for it")
    #expect(keys.loader.limiter!.state.withLock(owner: keys.loader.limiter!) { ($0.granted.count, $0.waiting.count) } == (0, 1))
    first.end()
    second.end()
    keys.running.end()
  }

  /// "A keyed upstream ... is ranked in that loader's queue by the highest demand of whoever waits
  /// for it ... and drops back when that demand goes": also when the demand that goes is the key's
  /// last claim (a background thumbnail still waits for the item).
  @Test func anUpstreamDropsBackWhenItsLastClaimEnds() async throws {
    let rows = KeyedUpstreamDemandTests.Rows()
    let busy = try await rows.holdTheSlot()
    let thumbnail = rows.thumbnails.begin("t", priority: .background)  // item t waits at the background rank
    await eventually { rows.waitingForASlot == 1 }
    let claim = rows.items.begin("item t")  // visible: item t moves up
    let other = rows.items.begin("item v", priority: .prefetch)
    #expect(rows.waitingForASlot == 2)
    claim.end()  // the visible claim goes: only the background thumbnail waits for item t
    rows.busy.resolve(())
    let started = await rows.startedAfterBusy(2)
    #expect(started == ["item v", "item t"], "item t kept the rank of the claim that ended")
    other.end()
    thumbnail.end()
    busy.end()
  }

  /// Without the claim that came and went, the prefetched item goes first (passed before the fix too).
  @Test func withoutAClaimThePrefetchedItemGoesFirst() async throws {
    let rows = KeyedUpstreamDemandTests.Rows()
    let busy = try await rows.holdTheSlot()
    let thumbnail = rows.thumbnails.begin("t", priority: .background)
    await eventually { rows.waitingForASlot == 1 }
    let other = rows.items.begin("item v", priority: .prefetch)
    #expect(rows.waitingForASlot == 2)
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item v", "item t"])
    other.end()
    thumbnail.end()
    busy.end()
  }

  /// "A prefetched load never starts before a visible one that waits with it" / "a task that finds
  /// every slot taken takes it if the load it was kept for is not more urgent": the slot is kept for
  /// a prefetched key whose task has not come (it loads a dependency first); a visible key claimed
  /// then gets a place in the queue, and its task, which comes first, waits there: the prefetched
  /// load starts before it.
  @Test func aVisibleLoadWithAReservedPlaceBorrowsASlotKeptForAPrefetch() async throws {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let late = Gate()
    let key1 = loader.loadable(for: 1)
    key1.addDependency(AsyncLoadable<Int> {
      await late.wait()
      return 0
    })
    let prefetch = loader.begin(1, priority: .prefetch)  // the one slot is kept for it
    #expect(loader.loadCounts == (0, 1))
    let visible = loader.begin(2)  // a place in the queue; its task comes for it at once
    await eventually {
      source.stats.startedPerKey[2] == 1
        || loader.limiter!.state.withLock(owner: loader.limiter!) { $0.waiting.contains { $0.element.continuation != nil } }
    }
    late.open()  // the prefetched key's task comes for its slot
    await source.waitForStarts(1)
    #expect(source.stats.startedPerKey[2] == 1, "the visible load should start first")
    #expect(source.stats.startedPerKey[1] == nil, "the prefetched load started before the visible one")
    prefetch.end()
    visible.end()
    _ = key1
  }

  /// The same, when the last claim's grace period runs out: the load goes on for the background
  /// thumbnail, at the rank of the visible claim that ended.
  @Test func anUpstreamDropsBackWhenItsLastClaimsGracePeriodEnds() async throws {
    let started = Recorder<String>()
    let busy = ControlledLoad<Void>()
    let clock = TestClock()
    let items = ContentLoader<String, String, Int>(
      gracePeriod: .seconds(10), idleTimeout: nil, maximumConcurrentLoads: 1, clock: clock
    ) { key in
      started.append(key)
      if key == "busy" { try await busy.operation() }
      return (key, 1)
    }
    let thumbnails = ContentLoader<String, String, Int>(idleTimeout: nil) { key in
      ("thumbnail of " + (try await items.loadable(for: "item \(key)").fetch()), 1)
    }
    let busyClaim = items.begin("busy")
    try await busy.waitForStart()
    let thumbnail = thumbnails.begin("t", priority: .background)  // item t waits at the background rank
    await eventually { items.limiter!.waitingCount == 1 }
    let claim = items.begin("item t")  // visible: item t moves up
    let other = items.begin("item v", priority: .prefetch)
    #expect(items.limiter!.waitingCount == 2)
    claim.end()  // the grace period
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(11))  // it runs out: only the background thumbnail waits for item t
    let entry = try #require(items.loadable(for: "item t") as? ContentLoader<String, String, Int>.KeyedLoadable)
    await eventually { items.withState { _ in entry.graceTimer == nil } }
    busy.resolve(())
    await eventually { started.count == 3 }
    #expect(Array(started.values.dropFirst()) == ["item v", "item t"], "item t kept the rank of the claim that ended")
    other.end()
    thumbnail.end()
    busyClaim.end()
  }

  /// "Demand passes from key to key, and through a plain loadable between two keys only upward:
  /// the plain loadable's task is raised ... so a key behind it keeps the higher rank": a key whose
  /// slot is kept waits for a plain loadable that waits for key 2. The key is raised to visible
  /// after the plain loadable joined key 2 at the prefetch rank: key 2 stays prefetch, its task
  /// cannot borrow the kept (now visible) slot, and the two wait for each other for good.
  @Test func aRaiseThroughAPlainLoadableReachesTheKeyBehindIt() async throws {
    let keys = await KeyOneWaitsForKeyTwo(key2WaitsForSlow: true)
    let first = keys.loader.begin(1, priority: .prefetch)  // a place in the queue; its task loads its dependency
    await eventually { keys.loader.limiter!.waitingCount == 1 }
    await keys.keepTheSlotForKeyOne()
    keys.late.open()  // the plain loadable waits for key 2 (started by it, no place yet), at the prefetch rank
    await eventually { keys.loader.withState { _ in keys.key2.waiting != nil } }
    first.priority = .visible  // key 1, and the plain loadable's task, are raised
    keys.slow.open()  // key 2's task comes for a slot
    let started = await keys.keyTwoStarts()
    let rank = keys.loader.withState { _ in keys.key2.loadPriority }
    #expect(started, "key 2 never started (ranked \(rank)): key 1 keeps the slot and waits for it")
    first.end()
    keys.running.end()
  }
}

/// A loader with one slot, taken by key 0's load until ``keepTheSlotForKeyOne()``; key 1, whose
/// dependency (a plain loadable) waits for key 2 once `late` opens; and key 2, whose task comes for
/// a slot at once or, with `key2WaitsForSlow`, once `slow` opens (its own dependency first).
struct KeyOneWaitsForKeyTwo {
  let source = KeyedSource()
  let loader: Loader
  let running: Loader.Claim
  let late = Gate()
  let slow = Gate()
  let key1: AsyncLoadable<String>
  let key2: Loader.KeyedLoadable

  init(key2WaitsForSlow: Bool) async {
    let source = source
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    self.loader = loader
    running = loader.begin(0)
    await source.waitForStarts(1)
    let late = late
    key1 = loader.loadable(for: 1)
    key1.addDependency(AsyncLoadable<String> {
      await late.wait()
      return try await loader.loadable(for: 2).fetchIfNeeded()
    })
    key2 = loader.loadable(for: 2) as! Loader.KeyedLoadable
    if key2WaitsForSlow {
      let slow = slow
      key2.addDependency(AsyncLoadable<Int> {
        await slow.wait()
        return 0
      })
    }
  }

  /// Key 0's load returns: its slot is kept for key 1, whose task loads its dependency first.
  func keepTheSlotForKeyOne() async {
    source.resolve(0, "zero", version: 1)
    await eventually { loader.limiter!.state.withLock(owner: loader.limiter!) { $0.granted.count == 1 } }
  }

  /// Whether key 2's load starts (bounded: were it never to, both keys wait for good).
  func keyTwoStarts() async -> Bool {
    await eventually(2_000, timeout: .seconds(3)) { source.stats.startedPerKey[2] == 1 }
    return source.stats.startedPerKey[2] == 1
  }
}
