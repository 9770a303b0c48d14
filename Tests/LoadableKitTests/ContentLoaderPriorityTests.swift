@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("ContentLoader priorities and limits (issue 15)", .timeLimit(.minutes(1)))
struct ContentLoaderPriorityTests {
  private func limited(_ source: KeyedSource, _ limit: Int) -> Loader {
    Loader(idleTimeout: nil, maximumConcurrentLoads: limit, load: { try await source.load($0) })
  }

  @Test func aWaitingLoadWhoseClaimsEndedNeverStarts() async {
    let source = KeyedSource()
    let loader = limited(source, 1)
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let queued = loader.begin(1)  // waits for the one slot
    #expect(queued.snapshot.status == .loading)
    queued.end()
    let next = loader.begin(2)
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[1] == nil && source.stats.startedPerKey[2] == 1)
    source.resolve(2, "two", version: 1)
    await eventually { next.snapshot.status == .loaded }
    running.end()
    next.end()
  }

  /// A key whose loadable depends on another key of the same loader, with one slot: the claim's
  /// load is granted the slot, then waits for its dependency, whose load needs a slot too. Before
  /// the fix the dependency waited for the slot its dependent kept, and both waited for good.
  @Test func aLoadThatDependsOnAnotherKeyOfTheLoaderDoesNotWaitForItself() async throws {
    let source = KeyedSource(autoResolve: true)
    let loader = limited(source, 1)
    let first = loader.loadable(for: 1)
    first.addDependency(loader.loadable(for: 2))
    let claim = loader.begin(1)
    try await first.load()
    #expect(first.loadStatus == .loaded)
    #expect(loader.loadable(for: 2).loadStatus == .loaded)
    #expect(loader.limiter?.peak == 1)
    claim.end()
    await eventually { loader.limiter?.takenCount == 0 }
  }

  @Test func prefetchedKeysNeverStartBeforeVisibleOnes() async {
    let source = KeyedSource()
    let loader = limited(source, 1)
    let first = loader.begin(0)
    await source.waitForStarts(1)
    let ahead = loader.prefetch([1, 2])  // queued first
    let visible = loader.begin(3)  // queued last, but visible
    await eventually { loader.limiter!.waitingCount == 3 }
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[3] == 1 && source.stats.startedPerKey[1] == nil)
    // A prefetched row that appears on screen moves ahead of the other prefetched one.
    let shown = loader.begin(2)
    source.resolve(3, "three", version: 1)
    await source.waitForStarts(3)
    #expect(source.stats.startedPerKey[2] == 1 && source.stats.startedPerKey[1] == nil)
    // Cancelling the prefetch of a key still waiting means it never starts.
    ahead.cancel([1])
    source.resolve(2, "two", version: 1)
    await eventually { shown.snapshot.status == .loaded }
    #expect(source.stats.startedPerKey[1] == nil && source.stats.started == 3)
    for claim in [first, visible, shown] { claim.end() }
  }

  @Test func raisingAClaimMovesItsWaitingLoadAhead() async {
    let source = KeyedSource()
    let loader = limited(source, 1)
    let first = loader.begin(0)
    await source.waitForStarts(1)
    let a = loader.begin(1, priority: .prefetch)
    let b = loader.begin(2, priority: .prefetch)
    b.priority = .visible
    #expect(b.priority == .visible)
    await eventually { loader.limiter!.waitingCount == 2 }
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[2] == 1 && source.stats.startedPerKey[1] == nil)
    // Lowering moves it back: the highest claim decides.
    b.priority = .background
    source.resolve(2, "two", version: 1)
    await source.waitForStarts(3)
    #expect(source.stats.startedPerKey[1] == 1)
    for claim in [first, a, b] { claim.end() }
  }

  @Test func raisingAClaimRaisesTheRunningLoadsTaskPriority() async throws {
    let control = ControlledLoad<Int>()
    let observed = Mutex<TaskPriority?>(nil)
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { _ in
      let value = try await control.operation()
      observed.withLock(owner: control) { $0 = Task.currentPriority }
      return (value, 1)
    }
    let claim = await Task(priority: .background) { loader.begin(1, priority: .background) }.value
    try await control.waitForStart()
    claim.priority = .visible
    control.resolve(1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    let priority = try #require(observed.withLock(owner: control) { $0 })
    #expect(priority >= .userInitiated)
    claim.end()
  }

  @Test func theLimitHoldsUnderAThousandClaimsWithChurn() async {
    let running = Gauge()
    let peak = Atomic<Int>(0)
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil, maximumIdleCount: 50, maximumConcurrentLoads: 6) {
      key in
      let now = running.increment()
      peak.max(now, ordering: .relaxed)
      defer { running.decrement() }
      for _ in 0..<3 { await Task.yield() }
      return (key, 1)
    }
    await withTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        group.addTask {
          var held: [ContentLoader<Int, Int, Int>.Claim] = []
          for step in 0..<125 {
            let key = (worker * 131 + step * 7) % 1_000
            held.append(loader.begin(key, priority: ClaimPriority.allCases[step % 3]))
            if step % 2 == 0, !held.isEmpty { held.removeFirst().end() }
            await Task.yield()
          }
          for claim in held { claim.end() }
        }
      }
    }
    #expect(peak.load(ordering: .relaxed) <= 6)
    #expect(loader.limiter!.peak <= 6)
    for key in 0..<1_000 {
      #expect(loader.snapshot(for: key)?.status != .loading)
    }
  }
}
