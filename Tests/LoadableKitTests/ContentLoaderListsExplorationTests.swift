@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The list features of issue 15 — `maximumConcurrentLoads`, priorities, prefetch, `staleAfter`,
/// `invalidate(where:)` and the cost limit — in seeded interleavings (1,000 seeds each).
@Suite("ContentLoader lists schedule exploration", .timeLimit(.minutes(5)))
struct ContentLoaderListsExplorationTests {
  typealias Loader = ContentLoader<Int, String, Int>

  /// Claims beginning, changing priority and ending concurrently over five keys with a limit of
  /// two: never more than two loads run at once (counted inside the load), nothing is left
  /// waiting or loading, and a key whose only claim ended before its load started never calls
  /// the data source.
  @Test func theLimitHoldsAndAnEndedQueuedLoadNeverStarts() {
    explore { executor, generator in
      let keyCount = 5
      let running = Gauge()
      let peak = Atomic<Int>(0)
      let started = StartLog()
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let attempts = AttemptCounter()
      let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 2, instrument: attempts) { key in
        started.record(key)
        let now = running.increment()
        peak.max(now, ordering: .relaxed)
        defer { running.decrement() }
        for _ in 0..<yieldCount {
          await Task.yield()
          try Task.checkCancellation()
        }
        return ("thumbnail \(key)", 1)
      }
      let kept = Recorder<Loader.Claim>()
      let endedUnstarted = Recorder<Int>()
      for key in 0..<keyCount {
        let priority = ClaimPriority.allCases.randomElement(using: &generator)!
        let changed = Int.random(in: 0...2, using: &generator) == 0 ? nil : ClaimPriority.allCases.randomElement(using: &generator)!
        let before = Int.random(in: 0...3, using: &generator)
        let after = Int.random(in: 0...3, using: &generator)
        let keep = Int.random(in: 0...2, using: &generator) == 0
        executor.spawn {
          let claim = loader.begin(key, priority: priority)
          await yields(before)
          if let changed { claim.priority = changed }
          await yields(after)
          if keep { return kept.append(claim) }
          claim.end()
          // Ended before the data source was called: it must never be called for this key.
          if started.count(key) == 0 { endedUnstarted.append(key) }
        }
      }
      return {
        var problems: [String] = []
        if peak.load(ordering: .relaxed) > 2 { problems.append("\(peak.load(ordering: .relaxed)) loads ran at once") }
        if loader.limiter!.peak > 2 { problems.append("the limiter let \(loader.limiter!.peak) run") }
        if loader.limiter!.waitingCount != 0 { problems.append("loads left waiting for a slot") }
        if loader.limiter!.takenCount != 0 { problems.append("\(loader.limiter!.takenCount) slots never given back") }
        // Every attempt's task returned: a load waiting for a slot whose place was taken out of the
        // queue without its continuation would wait for good, unseen by the checks above.
        if attempts.started != attempts.ended { problems.append("attempts started \(attempts.started), ended \(attempts.ended)") }
        for key in endedUnstarted.values where started.count(key) != 0 {
          problems.append("key \(key) loaded after its only claim ended in the queue")
        }
        for key in 0..<keyCount {
          if loader.snapshot(for: key)?.status == .loading { problems.append("key \(key) still loading") }
          if started.count(key) > 1 { problems.append("key \(key) loaded \(started.count(key)) times") }
        }
        for claim in kept.values {
          let snapshot = claim.snapshot
          if snapshot.status != .loaded || snapshot.value != "thumbnail \(claim.key)" {
            problems.append("kept claim on \(claim.key) shows \(snapshot.status)")
          }
          claim.end()
        }
        return problems
      }
    }
  }

  /// With one slot held by a blocked load, prefetched keys and visible claims queue in a random
  /// order (some prefetched keys then get a visible claim too); when the slot frees, every
  /// visible key's load starts before any key only prefetched.
  @Test func prefetchNeverStartsAheadOfAVisibleClaim() {
    explore { executor, generator in
      let gate = Gate()
      let started = StartLog()
      let loader = oneSlotLoader(started: started, holding: gate)
      // Keys 1...4: prefetched, visible, or prefetched and then shown.
      let kinds = (1...4).map { _ in Int.random(in: 0...2, using: &generator) }
      let delays = (1...4).map { _ in Int.random(in: 0...3, using: &generator) }
      let visible = Set((1...4).filter { kinds[$0 - 1] != 0 })
      let kept = Recorder<Loader.Claim>()
      let handles = Recorder<Loader.Prefetch>()
      let claimed = Atomic<Int>(0)
      executor.spawn {
        kept.append(loader.begin(0))
        while started.count(0) == 0 { await Task.yield() }
        for key in 1...4 {
          let kind = kinds[key - 1]
          let delay = delays[key - 1]
          executor.spawn {
            await yields(delay)
            if kind != 1 { handles.append(loader.prefetch([key])) }
            await yields(delay)
            if kind != 0 { kept.append(loader.begin(key, priority: .visible)) }
            claimed.add(1, ordering: .relaxed)
          }
        }
        // Every key waits for the slot before it frees.
        while claimed.load(ordering: .relaxed) < 4 || loader.limiter!.waitingCount < 4 { await Task.yield() }
        gate.open()
      }
      return {
        var problems: [String] = []
        let order = started.order
        if Set(order) != Set(0...4) { problems.append("started \(order)") }
        if let lastVisible = order.lastIndex(where: { visible.contains($0) }),
          let firstPrefetch = order.firstIndex(where: { $0 != 0 && !visible.contains($0) }),
          firstPrefetch < lastVisible
        {
          problems.append("a prefetched key started ahead of a visible one: \(order), visible \(visible.sorted())")
        }
        for claim in kept.values { claim.end() }
        for handle in handles.values { handle.cancel() }
        return problems
      }
    }
  }

  /// The slot frees while a visible claim's load is on its way to the queue: with one slot held
  /// by a blocked load and a prefetched key already waiting for it, a visible claim begins on one
  /// task while another lets the blocked load finish. A load joins the queue when its claim starts
  /// it, so whenever the visible claim had begun before the slot was given back, its load starts
  /// before the prefetched one — even when its task had not run yet.
  @Test func aFreedSlotGoesToAVisibleLoadWhoseTaskHasNotRunYet() {
    explore { executor, generator in
      let gate = Gate()
      let started = StartLog()
      let visibleBegun = Atomic<Bool>(false)
      let begunBeforeRelease = Atomic<Bool>(false)
      let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1) { key in
        started.record(key)
        if key == 0 {
          await gate.wait()
          // The slot is given back when this load returns, right after this read.
          begunBeforeRelease.store(visibleBegun.load(ordering: .relaxed), ordering: .relaxed)
        }
        return ("thumbnail \(key)", 1)
      }
      let delays = (0..<2).map { _ in Int.random(in: 0...4, using: &generator) }
      let kept = Recorder<Loader.Claim>()
      let handles = Recorder<Loader.Prefetch>()
      executor.spawn {
        kept.append(loader.begin(0))
        while started.count(0) == 0 { await Task.yield() }
        handles.append(loader.prefetch([1]))
        // The prefetched key waits for the slot before anything else happens.
        while loader.limiter!.waitingCount < 1 { await Task.yield() }
        executor.spawn {
          await yields(delays[0])
          kept.append(loader.begin(2, priority: .visible))
          visibleBegun.store(true, ordering: .relaxed)
        }
        open(gate, after: delays[1], on: executor)
      }
      return {
        var problems = leftovers(of: loader, keys: 0...2, started: started)
        let order = started.order
        if begunBeforeRelease.load(ordering: .relaxed),
          let prefetched = order.firstIndex(of: 1), let visible = order.firstIndex(of: 2), prefetched < visible
        {
          problems.append("the prefetch took the slot while a visible load was pending: \(order)")
        }
        for claim in kept.values { claim.end() }
        for handle in handles.values { handle.cancel() }
        return problems
      }
    }
  }

  /// A slot granted to a visible load whose task has not come yet is not lent to a less urgent
  /// load that finds every slot taken — here the dependency of a prefetched key, another key of
  /// the loader: only a place that is not more urgent lends its slot.
  @Test func aSlotGrantedToAVisibleLoadIsNotLentToALessUrgentOne() {
    explore { executor, generator in
      let gate = Gate()
      let started = StartLog()
      let loader = oneSlotLoader(started: started, holding: gate)
      let dependent = loader.loadable(for: 1)
      dependent.addDependency(loader.loadable(for: 2))
      // The visible key's task comes for its slot late, when it may have been granted one.
      let late = Gate()
      let visible = loader.loadable(for: 3)
      visible.addDependency(AsyncLoadable<Int> {
        await late.wait()
        return 0
      })
      let delays = (0..<2).map { _ in Int.random(in: 0...6, using: &generator) }
      let kept = Recorder<Loader.Claim>()
      executor.spawn {
        kept.append(loader.begin(0, priority: .visible))
        while started.count(0) == 0 { await Task.yield() }
        kept.append(loader.begin(1, priority: .prefetch))
        kept.append(loader.begin(3, priority: .visible))
        open(gate, after: delays[0], on: executor)
        open(late, after: delays[1], on: executor)
      }
      return {
        var problems = leftovers(of: loader, keys: 0...3, started: started)
        let order = started.order
        if let dependency = order.firstIndex(of: 2), let visible = order.firstIndex(of: 3), dependency < visible {
          problems.append("the prefetched key's dependency started before the visible key: \(order)")
        }
        for claim in kept.values { claim.end() }
        _ = (dependent, visible)
        return problems
      }
    }
  }

  /// Refreshes of a claimed key interleaved with a caller's `fetch()` of its loadable and, some of
  /// the time, the claim ending: while the claim stays, the value it ends with comes from a load
  /// that called the data source after the last refresh; once everything returned, nothing is
  /// left loading.
  @Test func aRefreshOfAClaimedKeyIsFollowedByALoadThatStartsAfterIt() {
    explore { executor, generator in
      let ticks = Atomic<Int>(0)
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let loader = Loader(idleTimeout: nil) { key in
        let tick = ticks.add(1, ordering: .relaxed).newValue
        for _ in 0..<yieldCount { await Task.yield() }
        return ("v\(tick)", tick)
      }
      let refreshes = (0..<Int.random(in: 1...3, using: &generator)).map { _ in Int.random(in: 0...4, using: &generator) }
      let fetches = (0..<Int.random(in: 0...2, using: &generator)).map { _ in Int.random(in: 0...4, using: &generator) }
      let ends = Int.random(in: 0...2, using: &generator) == 0
      let lastRefresh = Atomic<Int>(0)
      let kept = Recorder<Loader.Claim>()
      executor.spawn {
        let claim = loader.begin(0)
        for delay in refreshes {
          await yields(delay)
          lastRefresh.store(ticks.add(1, ordering: .relaxed).newValue, ordering: .relaxed)
          loader.refresh(0)
        }
        if ends { claim.end() } else { kept.append(claim) }
      }
      executor.spawn {
        let loadable = loader.loadable(for: 0)
        for delay in fetches {
          await yields(delay)
          _ = try? await loadable.fetch()
        }
      }
      return {
        var problems: [String] = []
        if let claim = kept.values.first {
          let snapshot = claim.snapshot
          let tick = snapshot.version ?? 0
          if snapshot.status != .loaded || tick < lastRefresh.load(ordering: .relaxed) {
            problems.append("after the last refresh (\(lastRefresh.load(ordering: .relaxed))) the claim shows \(snapshot)")
          }
          claim.end()
        } else if loader.snapshot(for: 0)?.status == .loading {
          problems.append("still loading after the claim ended")
        }
        return problems
      }
    }
  }

  /// What the Thumbnails playground's cells rely on: claims with handlers on two keys while
  /// refreshes, a caller's fetches and loads that yield interleave. A change may reach a handler
  /// after the call that made it returned (another task may be delivering), but every handler
  /// sees its key's versions in order, and once everything ran, each active claim's last
  /// snapshot is the key's current one.
  @Test func everyHandlerEndsWithItsKeysCurrentSnapshotInOrder() {
    explore { executor, generator in
      let ticks = Atomic<Int>(0)
      let yieldCount = Int.random(in: 0...2, using: &generator)
      let loader = Loader(idleTimeout: nil) { key in
        let tick = ticks.add(1, ordering: .relaxed).newValue
        for _ in 0..<yieldCount { await Task.yield() }
        return ("v\(tick)", tick)
      }
      let frames = (0..<3).map { _ in Recorder<Loader.Snapshot>() }
      let keys = (0..<3).map { _ in Int.random(in: 0...1, using: &generator) }
      let steps = (0..<4).map { _ in (Int.random(in: 0...2, using: &generator), Int.random(in: 0...1, using: &generator)) }
      let claims = Recorder<(Int, Loader.Claim)>()
      for (index, key) in keys.enumerated() {
        executor.spawn {
          let claim = loader.begin(key) { frames[index].append($0) }
          claims.append((index, claim))
        }
      }
      executor.spawn {
        for (action, key) in steps {
          switch action {
          case 0: loader.refresh(key)
          case 1: _ = try? await loader.loadable(for: key).fetch()
          default: await Task.yield()
          }
        }
      }
      return {
        var problems: [String] = []
        for (index, claim) in claims.values {
          let drawn = frames[index].values
          let versions = drawn.compactMap(\.version)
          if versions != versions.sorted() { problems.append("claim \(index) drew versions \(versions)") }
          let current = claim.snapshot
          if let last = drawn.last, last.status != current.status || last.version != current.version {
            problems.append("claim \(index) drew \(last) last, the key is \(current)")
          }
          claim.end()
        }
        return problems
      }
    }
  }

  /// A key loaded once, unclaimed, then either left fresh, aged past `staleAfter` on a
  /// `TestClock`, or marked by `invalidate(where:)`, while another key churns and is invalidated
  /// alongside: at the next claim the old value is shown at once, and a stale key (only a stale
  /// one) loads again and shows the new value.
  @Test func aStaleValueIsShownAndRefreshedAtTheNextClaim() {
    explore { executor, generator in
      let clock = TestClock()
      let started = StartLog()
      let yieldCount = Int.random(in: 0...2, using: &generator)
      let loader = Loader(idleTimeout: nil, staleAfter: .seconds(10), clock: clock) { key in
        let count = started.record(key)
        for _ in 0..<yieldCount { await Task.yield() }
        return ("v\(count)", count)
      }
      let action = Int.random(in: 0...2, using: &generator)  // 0 fresh, 1 aged, 2 invalidated
      let noise = (0..<3).map { _ in Int.random(in: 0...2, using: &generator) }
      let problems = Recorder<String>()
      executor.spawn {
        for step in noise {
          switch step {
          case 0:
            let claim = loader.begin(1, priority: .prefetch)
            await Task.yield()
            claim.end()
          case 1: loader.invalidate(where: { $0 == 1 })
          default: await Task.yield()
          }
        }
      }
      executor.spawn {
        let first = loader.begin(0)
        while first.snapshot.status != .loaded { await Task.yield() }
        first.end()
        switch action {
        case 0: await clock.advance(by: .seconds(5))
        case 1: await clock.advance(by: .seconds(11))
        default: loader.invalidate(where: { $0 % 2 == 0 })
        }
        let second = loader.begin(0)
        let shown = second.snapshot
        if shown.value != "v1" { problems.append("next claim shows \(String(describing: shown.value)), not the old value") }
        let stale = action != 0
        if stale && shown.status != .loading { problems.append("a stale value is not refreshed at once (\(shown.status))") }
        if !stale && shown.status != .loaded { problems.append("a fresh value is loaded again (\(shown.status))") }
        while second.snapshot.status != .loaded { await Task.yield() }
        let expected = stale ? "v2" : "v1"
        if second.snapshot.value != expected { problems.append("shows \(String(describing: second.snapshot.value)), not \(expected)") }
        if started.count(0) != (stale ? 2 : 1) { problems.append("key 0 loaded \(started.count(0)) times") }
        second.end()
      }
      return { problems.values }
    }
  }

  /// Values of cost 2 under a total cost limit of 3, over four keys claimed, kept and ended
  /// concurrently: a claimed key is never evicted (checked while its claim lives, after it has
  /// loaded), and when the values held cost more than the limit, all of them are claimed.
  @Test func theCostLimitNeverEvictsAClaimedEntry() {
    explore { executor, generator in
      let keyCount = 4
      let yieldCount = Int.random(in: 0...2, using: &generator)
      let loader = Loader(idleTimeout: nil, cost: { $0.count }, totalCostLimit: 3) { key in
        for _ in 0..<yieldCount { await Task.yield() }
        return ("t\(key)", 1)
      }
      let problems = Recorder<String>()
      let kept = Recorder<Loader.Claim>()
      for _ in 0..<6 {
        let key = Int.random(in: 0..<keyCount, using: &generator)
        let hold = Int.random(in: 0...4, using: &generator)
        let keep = Int.random(in: 0...2, using: &generator) == 0
        executor.spawn {
          let claim = loader.begin(key)
          while claim.snapshot.status != .loaded { await Task.yield() }
          for _ in 0..<hold {
            if loader.snapshot(for: key)?.value == nil { problems.append("claimed key \(key) was evicted") }
            await Task.yield()
          }
          if loader.snapshot(for: key)?.value == nil { problems.append("claimed key \(key) was evicted") }
          if keep { kept.append(claim) } else { claim.end() }
        }
      }
      return {
        var found = problems.values
        let claimed = Set(kept.values.map(\.key))
        let held = (0..<keyCount).filter { loader.snapshot(for: $0)?.value != nil }
        for key in claimed where !held.contains(key) { found.append("claimed key \(key) has no value") }
        if held.count * 2 > 3 && !held.allSatisfy(claimed.contains) {
          found.append("idle values over the cost limit: held \(held), claimed \(claimed.sorted())")
        }
        for claim in kept.values { claim.end() }
        return found
      }
    }
  }
}

/// Which keys the data source was called for, in order.
final class StartLog: Sendable {
  private let log = Mutex<[Int]>([])

  /// Records a call for `key`; returns how many calls `key` has had, this one included.
  @discardableResult func record(_ key: Int) -> Int {
    log.withLock(owner: self) { log in
      log.append(key)
      return log.count(where: { $0 == key })
    }
  }

  func count(_ key: Int) -> Int { log.withLock(owner: self) { $0.count(where: { $0 == key }) } }
  var order: [Int] { log.withLock(owner: self) { $0 } }
}

/// A one-shot gate: `wait()` suspends until `open()`.
final class Gate: Sendable {
  private let state = Mutex<(open: Bool, waiters: [UnsafeContinuation<Void, Never>])>((false, []))

  func wait() async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let open = state.withLock(owner: self) { state -> Bool in
        if state.open { return true }
        state.waiters.append(continuation)
        return false
      }
      if open { continuation.resume() }
    }
  }

  func open() {
    let waiters = state.withLock(owner: self) { state in
      state.open = true
      defer { state.waiters.removeAll() }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// Opens `gate` from a task of its own on `executor`, after `count` yields.
private func open(_ gate: Gate, after count: Int, on executor: ManualTaskExecutor) {
  executor.spawn {
    await yields(count)
    gate.open()
  }
}

/// What a run over a limited loader left wrong: keys whose load never started, and slots or
/// places still held.
private func leftovers(
  of loader: ContentLoaderListsExplorationTests.Loader, keys: ClosedRange<Int>, started: StartLog
) -> [String] {
  var problems: [String] = []
  if Set(started.order) != Set(keys) { problems.append("started \(started.order)") }
  if loader.limiter!.takenCount != 0 || loader.limiter!.waitingCount != 0 { problems.append("slots or places left") }
  return problems
}

/// A loader with one slot whose key 0 holds it until `gate` opens; every load is logged in
/// `started`.
private func oneSlotLoader(started: StartLog, holding gate: Gate) -> ContentLoaderListsExplorationTests.Loader {
  ContentLoaderListsExplorationTests.Loader(idleTimeout: nil, maximumConcurrentLoads: 1) { key in
    started.record(key)
    if key == 0 { await gate.wait() }
    return ("thumbnail \(key)", 1)
  }
}

/// Counts the attempts started and ended (a cancelled attempt ends when its task returns).
private final class AttemptCounter: LoadInstrument {
  private let counts = Mutex((started: 0, ended: 0))
  var started: Int { counts.withLock(owner: self) { $0.started } }
  var ended: Int { counts.withLock(owner: self) { $0.ended } }
  func attemptStarted(_ attempt: LoadAttempt) { counts.withLock(owner: self) { $0.started += 1 } }
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) { counts.withLock(owner: self) { $0.ended += 1 } }
}
