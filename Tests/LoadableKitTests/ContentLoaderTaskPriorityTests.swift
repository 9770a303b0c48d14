@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The task a key's load runs in starts at its claims' priority, not at the priority of whoever
/// happened to begin the claim (issue 15).
@Suite("ContentLoader load task priority", .timeLimit(.minutes(1)))
struct ContentLoaderTaskPriorityTests {
  /// A loader whose load records `Task.currentPriority` per key and waits for `control`.
  private func observing(_ control: ControlledLoad<Int>, into observed: Recorder<(key: Int, priority: TaskPriority)>)
    -> ContentLoader<Int, Int, Int>
  {
    ContentLoader<Int, Int, Int>(idleTimeout: nil) { key in
      observed.append((key, Task.currentPriority))
      return (try await control.operation(), 1)
    }
  }

  @Test func aPrefetchedKeyLoadsAtThePrefetchPriorityNotTheCallers() async throws {
    let control = ControlledLoad<Int>()
    let observed = Recorder<(key: Int, priority: TaskPriority)>()
    let loader = observing(control, into: observed)
    let ahead = await Task(priority: .userInitiated) { loader.prefetch([1]) }.value
    try await control.waitForStart()
    let priority = try #require(observed.values.first(where: { $0.key == 1 })?.priority)
    #expect(priority == ClaimPriority.prefetch.taskPriority)
    #expect(priority < .userInitiated)
    control.resolve(1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    ahead.cancel()
  }

  /// A cell configured from a background task (a data source's diffing, say) claims a row on
  /// screen: its load, and the loads it waits for, run at the visible priority, not the caller's.
  @Test func aVisibleClaimFromABackgroundTaskLoadsAtTheVisiblePriority() async throws {
    let control = ControlledLoad<String>()
    let observed = Recorder<(key: String, priority: TaskPriority)>()
    let item = AsyncLoadable<String>(name: "item") {
      observed.append(("item", Task.currentPriority))
      return try await control.operation()
    }
    let loader = ContentLoader<Int, String, Int>(idleTimeout: nil) { key in
      observed.append(("row \(key)", Task.currentPriority))
      return (try await item.fetchIfNeeded() + " \(key)", 1)
    }
    let claim = await Task(priority: .background) { loader.begin(3) }.value
    try await control.waitForStart()
    for name in ["row 3", "item"] {
      let priority = try #require(observed.values.first(where: { $0.key == name })?.priority)
      #expect(priority >= ClaimPriority.visible.taskPriority, "\(name) ran at \(priority)")
    }
    control.resolve("thumbnail")
    await eventually { claim.snapshot.status == LoadStatus.loaded }
    claim.end()
  }

  @Test func aBackgroundClaimLoadsAtBackgroundPriority() async throws {
    let control = ControlledLoad<Int>()
    let observed = Recorder<(key: Int, priority: TaskPriority)>()
    let loader = observing(control, into: observed)
    let claim = await Task(priority: .userInitiated) { loader.begin(2, priority: ClaimPriority.background) }.value
    try await control.waitForStart()
    #expect(observed.values.first(where: { $0.key == 2 })?.priority == TaskPriority.background)
    control.resolve(2)
    await eventually { claim.snapshot.status == LoadStatus.loaded }
    claim.end()
  }
}
