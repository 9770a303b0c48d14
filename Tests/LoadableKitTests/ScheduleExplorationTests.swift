@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Runs a scenario under many seeded schedules on a ``ManualTaskExecutor`` and checks its
/// invariants after each. A failing seed is reported so it can be replayed with `seeds: [seed]`.
func explore(
  _ seeds: Range<UInt64> = 0..<1_000,
  sourceLocation: SourceLocation = #_sourceLocation,
  _ scenario: (ManualTaskExecutor, inout SplitMix64) -> () -> [String]
) {
  for seed in seeds {
    var generator = SplitMix64(seed: seed)
    let executor = ManualTaskExecutor()
    let check = scenario(executor, &generator)
    executor.run(using: &generator)
    var violations = check()
    if executor.pendingJobCount != 0 { violations.append("jobs left on the executor") }
    if !violations.isEmpty {
      Issue.record("seed \(seed): \(violations.joined(separator: "; "))", sourceLocation: sourceLocation)
      return
    }
  }
}

/// Outcomes of the calls a scenario makes; each call must report exactly once.
final class Calls: Sendable {
  private let outcomes = Mutex<[Int: [String]]>([:])
  let expected: Int

  init(expected: Int) { self.expected = expected }

  func record(_ call: Int, _ outcome: String) {
    outcomes.withLock(owner: self) { $0[call, default: []].append(outcome) }
  }

  func record(_ call: Int, _ body: () async throws -> Void) async {
    do {
      try await body()
      record(call, "ok")
    } catch is CancellationError {
      record(call, "cancelled")
    } catch {
      record(call, "\(error)")
    }
  }

  var all: [Int: [String]] { outcomes.withLock(owner: self) { $0 } }

  /// Violations of "every call returned exactly once".
  var violations: [String] {
    let all = self.all
    var problems: [String] = []
    for call in 0..<expected {
      let count = all[call]?.count ?? 0
      if count != 1 { problems.append("call \(call) returned \(count) times") }
    }
    return problems
  }
}

/// An operation that yields a seeded number of times and counts attempts running at once.
final class ProbeLoad: Sendable {
  let running = Atomic<Int>(0)
  let maxRunning = Atomic<Int>(0)
  let attempts = Atomic<Int>(0)
  let yields: Int
  let failFirst: Bool
  /// "start", "finish", "finish(cancelled)" and whatever the scenario adds, in order.
  let log = Recorder<String>()

  init(yields: Int, failFirst: Bool = false) {
    self.yields = yields
    self.failFirst = failFirst
  }

  func run() async throws -> Int {
    let now = running.wrappingAdd(1, ordering: .relaxed).newValue
    maxRunning.max(now, ordering: .relaxed)
    defer { running.wrappingSubtract(1, ordering: .relaxed) }
    let attempt = attempts.wrappingAdd(1, ordering: .relaxed).newValue
    log.append("start")
    for _ in 0..<yields { await Task.yield() }
    log.append(Task.isCancelled ? "finish(cancelled)" : "finish")
    if failFirst && attempt == 1 { throw Boom(code: 1) }
    return attempt
  }

  func violations<T>(_ loadable: AsyncLoadable<T>) -> [String] {
    var problems: [String] = []
    if maxRunning.load(ordering: .relaxed) > 1 { problems.append("attempts overlapped") }
    let snapshot = loadable.snapshot
    if snapshot.status == .loading { problems.append("still loading with nothing left to run") }
    if (snapshot.error != nil) != (snapshot.status == .failed) { problems.append("error and status disagree") }
    if loadable.waiterCount != 0 { problems.append("waiters left") }
    return problems
  }
}

func yields(_ count: Int) async {
  for _ in 0..<count { await Task.yield() }
}

/// Spawns call `call` of a scenario: after `delay` yields, it cancels `loadable`'s attempt.
func spawnCancel<T: Sendable>(
  _ loadable: AsyncLoadable<T>, after delay: Int, on executor: ManualTaskExecutor, as call: Int, in calls: Calls
) {
  executor.spawn {
    await yields(delay)
    loadable.cancelLoad()
    calls.record(call, "ok")
  }
}

@Suite("Schedule exploration", .timeLimit(.minutes(5)))
struct ScheduleExplorationTests {
  @Test func concurrentLoadsAndACancel() {
    explore { executor, generator in
      let probe = ProbeLoad(yields: Int.random(in: 0...3, using: &generator))
      let loadable = AsyncLoadable { try await probe.run() }
      let calls = Calls(expected: 4)
      for call in 0..<3 {
        let kind = Int.random(in: 0...2, using: &generator)
        executor.spawn {
          await calls.record(call) {
            switch kind {
            case 0: try await loadable.load()
            case 1: _ = try await loadable.fetch()
            default: _ = try await loadable.fetchIfNeeded()
            }
          }
        }
      }
      spawnCancel(loadable, after: Int.random(in: 0...6, using: &generator), on: executor, as: 3, in: calls)
      return {
        var problems = calls.violations + probe.violations(loadable)
        let outcomes = calls.all.values.flatMap { $0 }
        if outcomes.contains(where: { $0 != "ok" && $0 != "cancelled" }) { problems.append("unexpected error") }
        if loadable.loadStatus == .failed && !(loadable.loadError is CancellationError) {
          problems.append("failed without a cancel")
        }
        return problems
      }
    }
  }

  @Test func aCancelledCallerLeavesTheAttemptToTheOthers() {
    explore { executor, generator in
      let probe = ProbeLoad(yields: Int.random(in: 0...3, using: &generator))
      let loadable = AsyncLoadable { try await probe.run() }
      let calls = Calls(expected: 3)
      let victim = executor.spawn { await calls.record(0) { try await loadable.load() } }
      executor.spawn { await calls.record(1) { _ = try await loadable.fetchIfNeeded() } }
      let delay = Int.random(in: 0...6, using: &generator)
      executor.spawn {
        await yields(delay)
        victim.cancel()
        calls.record(2, "ok")
      }
      return {
        var problems = calls.violations + probe.violations(loadable)
        if calls.all[1] != ["ok"] { problems.append("the other caller did not get the content") }
        if loadable.loadStatus != .loaded { problems.append("the attempt did not finish") }
        let attempts = probe.attempts.load(ordering: .relaxed)
        if attempts > 1 {
          // A second attempt is only possible when the victim was cancelled before it asked and
          // the other caller asked after the first attempt ended — which cannot happen here.
          problems.append("\(attempts) attempts")
        }
        return problems
      }
    }
  }

  @Test func retriesAfterAFailure() {
    explore { executor, generator in
      let probe = ProbeLoad(yields: Int.random(in: 0...2, using: &generator), failFirst: true)
      let loadable = AsyncLoadable { try await probe.run() }
      let calls = Calls(expected: 4)
      for call in 0..<4 {
        let retry = Bool.random(using: &generator)
        let delay = Int.random(in: 0...5, using: &generator)
        executor.spawn {
          await yields(delay)
          await calls.record(call) {
            if retry { try await loadable.retryLoad() } else { try await loadable.load() }
          }
        }
      }
      return {
        var problems = calls.violations + probe.violations(loadable)
        let outcomes = calls.all.values.flatMap { $0 }
        if outcomes.contains(where: { $0 != "ok" && $0 != "\(Boom(code: 1))" }) { problems.append("unexpected outcome") }
        if loadable.loadStatus == .loaded && loadable.content ?? 0 < 2 { problems.append("loaded from the failed attempt") }
        return problems
      }
    }
  }

  @Test func refreshesKeepContentMonotonic() {
    explore { executor, generator in
      let probe = ProbeLoad(yields: Int.random(in: 0...2, using: &generator))
      let loadable = AsyncLoadable { try await probe.run() }
      let calls = Calls(expected: 5)
      let seen = Recorder<Int>()
      for call in 0..<5 {
        let kind = Int.random(in: 0...3, using: &generator)
        let delay = Int.random(in: 0...4, using: &generator)
        executor.spawn {
          await yields(delay)
          await calls.record(call) {
            switch kind {
            case 0: loadable.sync()
            case 1: loadable.syncIfNeeded()
            case 2: seen.append(try await loadable.fetch())
            default: seen.append(try await loadable.fetchIfNeeded())
            }
          }
        }
      }
      return {
        var problems = calls.violations + probe.violations(loadable)
        if loadable.content != probe.attempts.load(ordering: .relaxed) {
          problems.append("content is not the last attempt's")
        }
        if seen.values.contains(where: { $0 > probe.attempts.load(ordering: .relaxed) }) {
          problems.append("a fetch saw an attempt that never ran")
        }
        return problems
      }
    }
  }

  @Test func cascadingCancelNeverLeavesTheParentFailed() {
    explore { executor, generator in
      let probe = ProbeLoad(yields: Int.random(in: 0...3, using: &generator))
      let parent = AsyncLoadable { try await probe.run() }
      let child = parent.map { $0 * 10 }
      let otherCaller = Bool.random(using: &generator)
      let calls = Calls(expected: 3)
      executor.spawn { await calls.record(0) { try await child.load() } }
      executor.spawn {
        if otherCaller { await calls.record(1) { try await parent.load() } } else { calls.record(1, "ok") }
      }
      let delay = Int.random(in: 0...6, using: &generator)
      executor.spawn {
        await yields(delay)
        probe.log.append("cancel")
        child.cancelLoad()
        calls.record(2, "ok")
      }
      return {
        var problems = calls.violations + probe.violations(parent)
        if parent.loadStatus == .failed { problems.append("the parent was left failed by a cascade") }
        let log = probe.log.values
        if !otherCaller, let start = log.firstIndex(of: "start"), let cancel = log.firstIndex(of: "cancel"),
          start < cancel, !log[..<cancel].contains(where: { $0.hasPrefix("finish") })
        {
          // The child's cancel came while the parent's attempt, which only the child wanted, ran.
          if !log.contains("finish(cancelled)") { problems.append("the cascade did not cancel the parent's attempt") }
          if parent.loadStatus != .notLoaded { problems.append("the parent was not restored: \(parent.loadStatus)") }
        }
        if otherCaller && calls.all[1] != ["ok"] { problems.append("the parent's own caller was cancelled") }
        if child.loadStatus == .loaded && child.content != (parent.content ?? 0) * 10 {
          problems.append("child content disagrees with the parent")
        }
        return problems
      }
    }
  }

  @Test func claimsBeginAndEnd() {
    explore { executor, generator in
      let loads = Counter()
      let cancelled = Counter()
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let loader = ContentLoader<Int, String, Int>(idleTimeout: nil) { key in
        loads.increment()
        do {
          for _ in 0..<yieldCount {
            await Task.yield()
            try Task.checkCancellation()
          }
        } catch {
          cancelled.increment()
          throw error
        }
        return ("thumbnail \(key)", 1)
      }
      let kept = Recorder<ContentLoader<Int, String, Int>.Claim>()
      let calls = Calls(expected: 4)
      var begins = 0
      for call in 0..<4 {
        let key = Int.random(in: 0...1, using: &generator)
        let delay = Int.random(in: 0...4, using: &generator)
        let keep = Int.random(in: 0...3, using: &generator) == 0
        begins += 1
        executor.spawn {
          let claim = loader.begin(key)
          await yields(delay)
          if keep { kept.append(claim) } else { claim.end() }
          calls.record(call, "ok")
        }
      }
      return {
        var problems = calls.violations
        let claimed = Set(kept.values.map(\.key))
        for key in 0...1 {
          guard let snapshot = loader.snapshot(for: key) else { continue }
          if claimed.contains(key) {
            if snapshot.status != .loaded || snapshot.value != "thumbnail \(key)" {
              problems.append("key \(key) is claimed but \(snapshot.status)")
            }
          } else if snapshot.status == .loading {
            problems.append("key \(key) has no claim but is still loading")
          }
        }
        if loads.count > begins { problems.append("\(loads.count) loads for \(begins) claims") }
        for claim in kept.values { claim.end() }
        return problems
      }
    }
  }

  @Test func aFailingSeedIsReported() {
    // The harness itself must be able to fail: a scenario that leaves a caller suspended forever.
    let never = Mutex<[UnsafeContinuation<Void, Never>]>([])
    withKnownIssue {
      explore(0..<1) { executor, _ in
        let calls = Calls(expected: 1)
        executor.spawn {
          await withUnsafeContinuation { continuation in never.withLock(owner: calls) { $0.append(continuation) } }
          calls.record(0, "ok")
        }
        return { calls.violations }
      }
    }
    for continuation in never.withLock(owner: Calls(expected: 0), { $0 }) { continuation.resume() }
  }
}
