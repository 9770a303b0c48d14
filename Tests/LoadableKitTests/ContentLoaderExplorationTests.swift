@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("ContentLoader schedule exploration", .timeLimit(.minutes(5)))
struct ContentLoaderExplorationTests {
  /// Claims beginning and ending, the keys' loadables loaded and cancelled, and a `map` and a
  /// `zip` over them, in seeded interleavings: every call returns exactly once, no key runs two
  /// loads at once, nothing is left loading, and the loader and the loadables agree.
  @Test func claimsLoadablesAndCombinatorsOverKeys() {
    explore { executor, generator in
      let running = [Gauge(), Gauge()]  // loads of each key that are running
      let overlapped = Atomic<Bool>(false)
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let loader = ContentLoader<Int, String, Int>(idleTimeout: nil) { key in
        if running[key].increment() > 1 { overlapped.store(true, ordering: .relaxed) }
        defer { running[key].decrement() }
        for _ in 0..<yieldCount {
          await Task.yield()
          try Task.checkCancellation()
        }
        return ("thumbnail \(key)", 1)
      }
      let kept = Recorder<ContentLoader<Int, String, Int>.Claim>()
      let callCount = 6
      let calls = Calls(expected: callCount)
      for call in 0..<callCount {
        let key = Int.random(in: 0...1, using: &generator)
        let delay = Int.random(in: 0...4, using: &generator)
        let kind = Int.random(in: 0...5, using: &generator)
        let keep = Int.random(in: 0...3, using: &generator) == 0
        executor.spawn {
          switch kind {
          case 0, 1:
            let claim = loader.begin(key)
            await yields(delay)
            if keep { kept.append(claim) } else { claim.end() }
            calls.record(call, "ok")
          case 2:
            await calls.record(call) { try await loader.loadable(for: key).load() }
          case 3:
            await yields(delay)
            loader.loadable(for: key).cancelLoad()
            calls.record(call, "ok")
          case 4:
            await calls.record(call) { _ = try await loader.loadable(for: key).map { $0.count }.fetch() }
          default:
            await calls.record(call) { try await zip(loader.loadable(for: 0), loader.loadable(for: 1)).load() }
          }
        }
      }
      return {
        var problems = calls.violations
        if overlapped.load(ordering: .relaxed) { problems.append("two loads of a key ran at once") }
        let outcomes = calls.all.values.flatMap { $0 }
        if outcomes.contains(where: { $0 != "ok" && $0 != "cancelled" }) { problems.append("unexpected error") }
        let claimed = Set(kept.values.map(\.key))
        for key in 0...1 {
          let loadable = loader.loadable(for: key)
          let state = loadable.snapshot
          if state.status == .loading { problems.append("key \(key) still loading with nothing left to run") }
          if (state.error != nil) != (state.status == .failed) { problems.append("key \(key): error and status disagree") }
          if state.status == .failed && !(state.error is CancellationError) { problems.append("key \(key) failed") }
          if loadable.waiterCount != 0 { problems.append("key \(key): waiters left") }
          if state.status == .loaded && state.content != "thumbnail \(key)" { problems.append("key \(key): wrong value") }
          if claimed.contains(key) && state.status == .notLoaded { problems.append("key \(key) claimed but not loaded") }
          if let snapshot = loader.snapshot(for: key) {
            if snapshot.status != state.status { problems.append("key \(key): loader says \(snapshot.status), loadable \(state.status)") }
          } else if claimed.contains(key) {
            problems.append("key \(key) claimed but has no entry")
          }
        }
        for claim in kept.values { claim.end() }
        return problems
      }
    }
  }
}

/// A count that goes up and down.
final class Gauge: Sendable {
  private let value = Atomic<Int>(0)
  @discardableResult func increment() -> Int { value.wrappingAdd(1, ordering: .relaxed).newValue }
  func decrement() { value.wrappingSubtract(1, ordering: .relaxed) }
}
