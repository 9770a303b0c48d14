@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("ContentLoader schedule exploration", .timeLimit(.minutes(5)))
struct ContentLoaderExplorationTests {
  /// Claims beginning and ending, the keys' loadables loaded and cancelled, and a `map` and a
  /// `zip` over them, in seeded interleavings: every call returns exactly once, a key's load
  /// starts beside another of the key only when that one was cancelled (SPEC §5: a fresh load
  /// need not wait for a cancelled one to return; before issue 27, no key ran two loads at once),
  /// nothing is left loading, and the loader and the loadables agree.
  @Test func claimsLoadablesAndCombinatorsOverKeys() {
    explore { executor, generator in
      let running = Mutex<[[ObjectIdentifier: CancelFlag]]>([[:], [:]])  // loads of each key running
      let overlapped = Atomic<Bool>(false)
      let yieldCount = Int.random(in: 0...3, using: &generator)
      let loader = ContentLoader<Int, String, Int>(idleTimeout: nil) { key in
        let flag = CancelFlag()
        let besideLive = running.withLock { running in
          defer { running[key][ObjectIdentifier(flag)] = flag }
          return running[key].values.contains { !$0.cancelled.load(ordering: .relaxed) }
        }
        if besideLive { overlapped.store(true, ordering: .relaxed) }
        defer { _ = running.withLock { $0[key].removeValue(forKey: ObjectIdentifier(flag)) } }
        return try await withTaskCancellationHandler {
          for _ in 0..<yieldCount {
            await Task.yield()
            try Task.checkCancellation()
          }
          return ("thumbnail \(key)", 1)
        } onCancel: {
          flag.cancelled.store(true, ordering: .relaxed)
        }
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
        if overlapped.load(ordering: .relaxed) { problems.append("a load of a key started beside one that was not cancelled") }
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

/// Set when the task of a load is cancelled.
final class CancelFlag: Sendable {
  let cancelled = Atomic<Bool>(false)
}
