@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A loadable whose attempts yield a few times, fail now and then, and record how many ran at once.
final class Flaky: AsyncLoadable<Int>, @unchecked Sendable {
  let running = Atomic<Int>(0)
  let maxRunning = Atomic<Int>(0)
  let attempts = Atomic<Int>(0)

  override func performLoad() async throws -> Int {
    let now = running.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
    maxRunning.max(now, ordering: .relaxed)
    defer { running.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
    let attempt = attempts.wrappingAdd(1, ordering: .relaxed).newValue
    for _ in 0..<(attempt % 4) { await Task.yield() }
    if attempt % 3 == 0 { throw Boom(code: attempt) }
    return attempt
  }
}

@Suite("Stress", .timeLimit(.minutes(2)))
struct StressTests {
  @Test(arguments: [1, 2, 3])
  func mixedOperationsKeepTheInvariants(seed: UInt64) async throws {
    var generator = SplitMix64(seed: seed)
    let loadables = (0..<8).map { _ in Flaky() }
    let returned = Counter()
    let operations = 4_000
    let plan = (0..<operations).map { _ in (generator.next() % 8, generator.next() % 9) }
    let run = Task {
      await withTaskGroup(of: Void.self) { group in
        for (index, operation) in plan {
          let loadable = loadables[Int(index)]
          group.addTask {
            switch operation {
            case 0: _ = try? await loadable.load()
            case 1: _ = try? await loadable.retryLoad()
            case 2: loadable.cancelLoad()
            case 3: loadable.sync()
            case 4: loadable.syncIfNeeded()
            case 5: _ = try? await loadable.fetch()
            case 6: _ = try? await loadable.fetchIfNeeded()
            case 7:
              let caller = Task { try await loadable.fetch() }
              caller.cancel()
              _ = await caller.result
            default:
              await withCheckedContinuation { continuation in
                loadable.retryLoad { _ in continuation.resume() }
              }
            }
            returned.increment()
          }
        }
      }
    }
    // A lost waiter never returns: count the calls that did, with a bound, rather than wait for
    // the group (which would hang the run instead of failing the test). A call that returned
    // twice traps in its checked continuation or counts more than `operations`.
    await eventually { returned.count >= operations }
    #expect(returned.count == operations, "\(returned.count) of \(operations) calls returned")
    guard returned.count == operations else { return run.cancel() }
    await run.value
    for loadable in loadables {
      await eventually { loadable.loadStatus != .loading }
      #expect(loadable.maxRunning.load(ordering: .relaxed) <= 1, "one attempt at a time")
      #expect(loadable.waiterCount == 0)
      let snapshot = loadable.snapshot
      #expect((snapshot.error != nil) == (snapshot.status == .failed))
    }
  }
}
