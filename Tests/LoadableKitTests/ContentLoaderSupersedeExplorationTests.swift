@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// SPEC §5's supersede and re-claim in seeded interleavings (1,000 seeds each): refreshes, a
/// claim that comes and goes, and a plain caller of the key's loadable, racing loads whose work
/// ignores cancellation and takes a random number of steps, with and without a load limit.
@Suite("ContentLoader supersede schedule exploration", .timeLimit(.minutes(5)))
struct ContentLoaderSupersedeExplorationTests {
  typealias Loader = ContentLoader<Int, String, Int>

  /// Numbers the data source's calls; a call's number is its result's version.
  final class CallLog: Sendable {
    private let calls = Mutex<Int>(0)
    func next() -> Int { calls.withLock(owner: self) { $0 += 1; return $0 } }
    var count: Int { calls.withLock(owner: self) { $0 } }
  }

  @Test(arguments: [nil, 1])
  func theLastLoadStartedIsTheOneThatLandsAndNothingStaleIsSeen(limit: Int?) {
    explore { executor, generator in
      let calls = CallLog()
      let steps = (0..<8).map { _ in Int.random(in: 0...4, using: &generator) }
      let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: limit) { _ in
        let call = calls.next()
        await yields(steps[call % steps.count])  // ignores its cancellation
        return ("load \(call)", call)
      }
      let seen = Recorder<Int>()  // the versions the long-lived claim saw, in order
      let keep = Mutex<Loader.Claim?>(nil)
      let answers = Recorder<Int>()  // what plain callers got
      let refreshes = Int.random(in: 1...3, using: &generator)
      let delays = (0..<6).map { _ in Int.random(in: 0...4, using: &generator) }
      let abandons = Bool.random(using: &generator)
      let calls2 = Bool.random(using: &generator)
      executor.spawn {
        let claim = loader.begin(1) { snapshot in if let version = snapshot.version { seen.append(version) } }
        keep.withLock { $0 = claim }
      }
      // The calls made before each refresh of the claimed key: a load must start after it.
      let refreshedAfter = Recorder<Int>()
      executor.spawn {
        for index in 0..<refreshes {
          await yields(delays[index])
          let claimed = keep.withLock { $0 != nil }
          let before = calls.count
          loader.refresh(1)
          if claimed { refreshedAfter.append(before) }
        }
      }
      if abandons {
        executor.spawn {
          await yields(delays[3])
          let other = loader.begin(1)
          await yields(delays[4])
          other.end()
        }
      }
      if calls2 {
        executor.spawn {
          await yields(delays[5])
          if let value = try? await loader.loadable(for: 1).fetch(), let version = Int(value.dropFirst(5)) {
            answers.append(version)
          }
        }
      }
      return {
        var problems: [String] = []
        let claim = keep.withLock { $0 }
        let snapshot = claim?.snapshot
        if snapshot?.status != .loaded { problems.append("the claim shows \(String(describing: snapshot?.status))") }
        // Every load started after another superseded or replaced it: the last one lands.
        if snapshot?.version != calls.count {
          problems.append("the claim shows version \(String(describing: snapshot?.version)) of \(calls.count) loads")
        }
        let content = loader.loadable(for: 1).content
        if content != "load \(calls.count)" {
          problems.append("the key's loadable holds \(String(describing: content)) of \(calls.count) loads")
        }
        if let last = refreshedAfter.values.max(), calls.count <= last {
          problems.append("no load started after a refresh (\(last) calls before it, \(calls.count) in all)")
        }
        let versions = seen.values
        if versions != versions.sorted() { problems.append("versions seen out of order: \(versions)") }
        for answer in answers.values where !versions.contains(answer) {
          problems.append("a caller got version \(answer), which the claim never showed (seen \(versions))")
        }
        if let limiter = loader.limiter, limiter.takenCount != 0 || limiter.waitingCount != 0 {
          problems.append("limiter left \(limiter.takenCount) taken, \(limiter.waitingCount) waiting")
        }
        claim?.end()
        return problems
      }
    }
  }
}

/// Demand flowing to keyed upstreams (SPEC §5) in seeded interleavings: thumbnails prefetched,
/// claimed, raised, lowered and ended while their items wait under a limit of 1. However the
/// steps interleave, every claim kept ends loaded, and no demand, slot or place is left behind.
@Suite("Keyed upstream demand schedule exploration", .timeLimit(.minutes(5)))
struct KeyedUpstreamDemandExplorationTests {
  typealias Loader = ContentLoader<Int, String, Int>

  @Test func demandIsRecordedAndForgottenWhateverTheOrder() {
    explore { executor, generator in
      let items = Loader(idleTimeout: nil, maximumConcurrentLoads: 1) { key in
        await Task.yield()
        return ("item \(key)", 1)
      }
      let thumbnails = Loader(idleTimeout: nil) { key in
        ("thumbnail of " + (try await items.loadable(for: key % 2).fetch()), 1)
      }
      let kept = Recorder<Loader.Claim>()
      let prefetches = Recorder<Loader.Prefetch>()
      for key in 0..<4 {
        let priority = ClaimPriority.allCases.randomElement(using: &generator)!
        let changed = Bool.random(using: &generator) ? ClaimPriority.allCases.randomElement(using: &generator)! : nil
        let delays = (0..<3).map { _ in Int.random(in: 0...3, using: &generator) }
        let prefetched = Bool.random(using: &generator)
        let keep = Bool.random(using: &generator)
        executor.spawn {
          if prefetched { prefetches.append(thumbnails.prefetch([key])) }
          await yields(delays[0])
          let claim = thumbnails.begin(key, priority: priority)
          await yields(delays[1])
          if let changed { claim.priority = changed }
          await yields(delays[2])
          if keep { kept.append(claim) } else { claim.end() }
        }
      }
      return {
        var problems: [String] = []
        for claim in kept.values where claim.snapshot.value != "thumbnail of item \(claim.key % 2)" {
          problems.append("kept claim on \(claim.key) shows \(claim.snapshot.status)")
        }
        for key in 0..<2 {
          guard let entry = items.loadable(for: key) as? Loader.KeyedLoadable else { continue }
          if items.withState({ _ in entry.waiting != nil }) { problems.append("demand left on item \(key)") }
          if items.snapshot(for: key)?.status == .loading { problems.append("item \(key) still loading") }
        }
        if let limiter = items.limiter, limiter.takenCount != 0 || limiter.waitingCount != 0 {
          problems.append("limiter left \(limiter.takenCount) taken, \(limiter.waitingCount) waiting")
        }
        for claim in kept.values { claim.end() }
        for prefetch in prefetches.values { prefetch.cancel() }
        return problems
      }
    }
  }
}
