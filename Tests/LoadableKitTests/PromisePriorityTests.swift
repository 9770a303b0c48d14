@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a priority raise that arrives between `.loading` and the attempt's task.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

@Suite("Promises: a raise before the attempt's task is attached", .timeLimit(.minutes(1)))
struct PromisePriorityTests {

  /// A key's load starts at its claim's priority, `.background`, explicitly. The key's status
  /// observer hears of `.loading` before the load's task exists, and has a view over the key join
  /// from the high-priority task that began the claim: that raise arrives before the task is
  /// attached, and must reach the task once it is.
  @Test func aRaiseBeforeTheAttemptsTaskIsAttachedIsKept() async throws {
    let control = ControlledLoad<Void>()
    let seen = Recorder<TaskPriority>()
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { key in
      try await control.operation()
      seen.append(Task.currentPriority)
      return (key, 1)
    }
    let keyed = loader.loadable(for: 1)
    let view = keyed.map { $0 * 10 }
    let joins = Counter()
    let observation = keyed.observeLoadStatus { status in
      // Runs on the task that began the claim, before the load's task is launched.
      if status == .loading && joins.increment() == 1 { view.sync() }
    }
    // When this returns, the load's task was launched and attached (and raised, if it is to be).
    let claim = await Task(priority: .high) { loader.begin(1, priority: .background) }.value
    #expect(joins.count == 1)
    try await control.waitForStart()
    control.resolve(())
    await eventually { claim.snapshot.status == .loaded }
    let priority = try #require(seen.values.first)
    #expect(priority >= .high, "the load ran at \(priority)")
    await eventually { view.content == 10 }
    observation.cancel()
    claim.end()
  }
}
