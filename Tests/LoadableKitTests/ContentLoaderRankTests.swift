@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A key's load is ranked among the loads waiting for `maximumConcurrentLoads` by whoever waits for
/// it, as they are now (LoadingKeyedContent, "A limit on loads", "Priorities"). Found by a second
/// review of the cache (helper 39); each test failed before its fix.
@Suite("ContentLoader: a load's rank follows whoever waits for it", .timeLimit(.minutes(1)))
struct ContentLoaderRankTests {
  /// "A plain caller of the key's loadable counts as visible": also when prefetch claims hold the
  /// key (the claims' rank was taken alone).

  @Test func aPlainCallerRaisesAPrefetchedKeysWaitingLoad() async throws {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let ahead = loader.prefetch([1, 2])  // both wait at the prefetch rank, 1 first
    await eventually { loader.limiter!.waitingCount == 2 }
    let loadable = loader.loadable(for: 2)
    let caller = Task { try await loadable.fetch() }  // a plain caller: counts as visible
    await eventually { loadable.waiterCount == 1 }
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[2] == 1, "the key a plain caller waits for should start first")
    #expect(source.stats.startedPerKey[1] == nil)
    ahead.cancel()  // cancels what runs and waits; the caller's load goes on
    await source.waitUntil { $0.startedPerKey[2, default: 0] >= 1 && $0.pending >= 1 }
    source.resolve(2, "two", version: 1)
    #expect(try await caller.outcome == "two")
    running.end()
  }

  /// "A task that finds every slot taken takes it if the load it was kept for is not more urgent":
  /// urgent as it is now. A slot kept for a prefetched key raised to visible before its task came
  /// was lent at the prefetch rank, to a prefetched key's dependency (`raisedLater`; claimed
  /// visible from the start, it passed before the fix too).
  @Test(arguments: [true, false])
  func aSlotKeptForAVisibleLoadIsNotLentToALessUrgentOne(raisedLater: Bool) async {
    let source = KeyedSource()
    let order = Recorder<Int>()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { key in
      order.append(key)
      return try await source.load(key)
    })
    // Key 3's task comes for its slot only once `late` opens (its dependency loads first).
    let late = Gate()
    let raised = loader.loadable(for: 3)
    raised.addDependency(AsyncLoadable<Int> {
      await late.wait()
      return 0
    })
    // Key 1's load loads key 2 first: a load with no place kept, at the prefetch rank.
    let prefetched = loader.loadable(for: 1)
    prefetched.addDependency(loader.loadable(for: 2))
    let a = loader.begin(3, priority: raisedLater ? .prefetch : .visible)  // the one slot is kept for it
    #expect(loader.loadCounts == (0, 1))
    if raisedLater { a.priority = .visible }  // raised before its task came
    let b = loader.begin(1, priority: .prefetch)  // a place in the queue; its task loads key 2
    await eventually { loader.loadCounts.waiting == 2 }
    late.open()
    await source.waitUntil { $0.pending == 1 }
    #expect(order.values == [3], "the visible key's kept slot went to a prefetched key's dependency: \(order.values)")
    a.end()  // cancels what runs and waits
    b.end()
    _ = (raised, prefetched)
  }

  /// "A key's load runs at the highest priority among its claims … The priority ranks the key's
  /// load among the loads waiting": a key's first claim ranks a load already waiting — one the
  /// grace period kept at the rank of the claim that ended, or one a dependent started. Neither
  /// was ranked anew.

  /// A visible claim that comes back within the grace period to a load still waiting for a slot
  /// leaves it at the rank of the prefetch claim that ended.
  @Test func aVisibleClaimWithinTheGracePeriodRaisesTheWaitingLoad() async {
    let source = KeyedSource()
    let clock = TestClock()
    let loader = Loader(
      gracePeriod: .seconds(10), idleTimeout: nil, maximumConcurrentLoads: 1, clock: clock,
      load: { try await source.load($0) })
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let other = loader.begin(5, priority: .prefetch)  // waits first, at the prefetch rank
    let prefetched = loader.begin(2, priority: .prefetch)  // waits second
    await eventually { loader.loadCounts.waiting == 2 }
    prefetched.end()  // the grace period: the load keeps its place
    let visible = loader.begin(2)  // back within it, visible
    #expect(visible.snapshot.status == .loading)
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[2] == 1, "the visible key should start before the prefetched one")
    #expect(source.stats.startedPerKey[5] == nil)
    visible.end()
    other.end()
    running.end()
  }

  /// The first claim on a key whose load a prefetched key's dependency started: visible, it
  /// should raise the load in the queue.
  @Test func aFirstVisibleClaimOnALoadADependentStartedRaisesIt() async {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let other = loader.begin(5, priority: .prefetch)  // waits first
    let dependent = loader.loadable(for: 1)
    dependent.addDependency(loader.loadable(for: 2))
    let prefetched = loader.begin(1, priority: .prefetch)  // waits; its task loads key 2 first
    await eventually { loader.loadCounts.waiting == 3 }  // 5, 1, and key 2's task
    let visible = loader.begin(2)  // key 2's first claim, visible
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[2] == 1, "the visible key should start before the prefetched one")
    #expect(source.stats.startedPerKey[5] == nil)
    visible.end()
    prefetched.end()
    other.end()
    running.end()
    _ = dependent
  }

  /// "A key's load runs at the highest priority among its claims": a visible first claim on a
  /// load a background task started — a dependent's (a `map` over the key's loadable), with or
  /// without a limit, or a plain caller's — raises its task. Without a limit, or for a plain
  /// caller (who counts as visible in the queue), the rank read before the claim was already
  /// visible, and the task stayed at background (the review of 9e0fbd2, helper 40).
  @Test(arguments: [(limit: Int?.none, plainCaller: false), (2, false), (nil, true)])
  func aFirstVisibleClaimRaisesALoadABackgroundTaskStarted(limit: Int?, plainCaller: Bool) async throws {
    let control = ControlledLoad<Int>()
    let observed = Mutex<TaskPriority?>(nil)
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil, maximumConcurrentLoads: limit) { _ in
      let value = try await control.operation()
      observed.withLock { $0 = Task.currentPriority }
      return (value, 1)
    }
    let key = loader.loadable(for: 1)
    let mapped = key.map { $0 + 1 }
    let starter = Task(priority: .background) { try await plainCaller ? key.load() : mapped.load() }
    try await control.waitForStart()
    let claim = await Task(priority: .background) { loader.begin(1) }.value
    control.resolve(1)
    _ = try await starter.outcome
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    let priority = try #require(observed.withLock { $0 })
    #expect(priority >= ClaimPriority.visible.taskPriority, "the claimed load ran at \(priority)")
    claim.end()
  }

  /// "A task that finds every slot taken borrows a kept slot only when its own load is at least as
  /// urgent" — as urgent as it is now: a task already waiting whose rank rises to the kept slot's
  /// borrows it. Here the kept slot's load waits for that very key (its dependency asks for it,
  /// which ranks it visible): nothing lent it the slot, and the two waited for each other for good
  /// (helper 40).
  @Test func aWaitingTaskRaisedToAKeptSlotsRankBorrowsIt() async throws {
    let keys = await KeyOneWaitsForKeyTwo(key2WaitsForSlow: false)
    let first = keys.loader.begin(1)  // visible: a place in the queue; its task loads its dependency first
    let second = keys.loader.begin(2, priority: .background)  // a place in the queue; its task comes for it
    await eventually { keys.loader.limiter!.state.withLock(owner: keys.loader.limiter!) { $0.waiting.contains { $0.element.continuation != nil } } }
    await keys.keepTheSlotForKeyOne()  // visible: not lent to key 2's background task
    keys.late.open()  // key 1's dependency now waits for key 2: key 2 is ranked visible
    #expect(await keys.keyTwoStarts(), "key 2 never started: key 1 keeps the slot and waits for it")
    first.end()
    second.end()
    keys.running.end()
  }
}
