@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("ContentLoader local writes and removal, schedule exploration (issue 30)", .timeLimit(.minutes(5)))
struct ContentLoaderCacheExplorationTests {
  /// Local writes, removals and refreshes racing claims, loads and callers of the keys' loadables,
  /// in seeded interleavings: every call returns exactly once and none fails (a write or a removal
  /// supersedes a load, it fails nobody), nothing is left loading or waiting, the loader and the
  /// loadables agree, and each value shown has its own version (a write's, or a load's).
  @Test func writesAndRemovalsRacingLoads() {
    explore { executor, generator in
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let loader = ContentLoader<Int, String, Int>(idleTimeout: nil) { key in
        for _ in 0..<yieldCount {
          await Task.yield()
          try Task.checkCancellation()
        }
        return ("load \(key)", 1)
      }
      let kept = Recorder<ContentLoader<Int, String, Int>.Claim>()
      let callCount = 6
      let calls = Calls(expected: callCount)
      for call in 0..<callCount {
        let key = Int.random(in: 0...1, using: &generator)
        let delay = Int.random(in: 0...4, using: &generator)
        let kind = Int.random(in: 0...6, using: &generator)
        let version = Int.random(in: 1...4, using: &generator)
        let keep = Int.random(in: 0...2, using: &generator) == 0
        executor.spawn {
          await yields(delay)
          switch kind {
          case 0, 1:
            let claim = loader.begin(key)
            await yields(delay)
            if keep { kept.append(claim) } else { claim.end() }
            calls.record(call, "ok")
          case 2:
            await calls.record(call) { try await loader.loadable(for: key).load() }
          case 3:
            await calls.record(call) { _ = try await loader.loadable(for: key).fetch() }
          case 4:
            loader.set("write \(key) \(version)", version: version, for: key)
            calls.record(call, "ok")
          case 5:
            loader.remove(key)
            calls.record(call, "ok")
          default:
            loader.refresh(key)
            calls.record(call, "ok")
          }
        }
      }
      return {
        var problems = calls.violations
        let outcomes = calls.all.values.flatMap { $0 }
        if outcomes.contains(where: { $0 != "ok" }) { problems.append("a call failed: \(outcomes)") }
        for key in 0...1 {
          let loadable = loader.loadable(for: key)
          let state = loadable.snapshot
          if state.status == .loading { problems.append("key \(key) still loading with nothing left to run") }
          if state.status == .failed { problems.append("key \(key) failed") }
          if loadable.waiterCount != 0 { problems.append("key \(key): waiters left") }
          if let snapshot = loader.snapshot(for: key) {
            if snapshot.status != state.status { problems.append("key \(key): loader says \(snapshot.status), loadable \(state.status)") }
            if snapshot.value != state.content { problems.append("key \(key): loader shows \(snapshot.value ?? "-"), loadable \(state.content ?? "-")") }
            if let value = snapshot.value {
              let expected = value.hasPrefix("write") ? "write \(key) \(snapshot.version ?? -1)" : "load \(key)"
              let expectedVersion = value.hasPrefix("write") ? snapshot.version : 1
              if value != expected || snapshot.version != expectedVersion {
                problems.append("key \(key): \(value) shown with version \(snapshot.version.map(String.init) ?? "-")")
              }
            }
          }
        }
        for claim in kept.values {
          let own = claim.snapshot
          if own.status == .notLoaded { problems.append("key \(claim.key) claimed but not loaded") }
        }
        for claim in kept.values { claim.end() }
        return problems
      }
    }
  }
}
