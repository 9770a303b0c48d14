import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Demand flows upstream (issue "ContentLoader for real lists"): a keyed load passes its priority
/// to the attempts it waits for — a thumbnail needs its item, the item its portal.
@Suite("Upstream demand", .timeLimit(.minutes(1)))
struct UpstreamDemandTests {
  /// The priority each level saw once its work could go on.
  final class Seen: Sendable {
    let values = Mutex<[String: TaskPriority]>([:])
    func record(_ name: String) { values.withLock(owner: self) { $0[name] = Task.currentPriority } }
    subscript(name: String) -> TaskPriority? { values.withLock(owner: self) { $0[name] } }
  }

  @Test func raisingAClaimRaisesTheAttemptsItsLoadWaitsFor() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = AsyncLoadable<String>(name: "portal") {
      try await gate.operation()
      seen.record("portal")
      return "portal"
    }
    let item = AsyncLoadable<String>(name: "item") {
      let portal = try await portal.fetchIfNeeded()
      seen.record("item")
      return "item of \(portal)"
    }
    let thumbnails = ContentLoader<String, String, Int> { key in
      let item = try await item.fetchIfNeeded()
      seen.record("thumbnail")
      return ("\(key) of \(item)", 1)
    }
    // The list claims the row while it is far off screen: everything starts in the background.
    let claim = await Task(priority: .background) { thumbnails.begin("row 7", priority: .background) }.value
    await gate.waitForStart()
    // The row scrolls into view.
    claim.priority = .visible
    gate.resolve(())
    await eventually { thumbnails.snapshot(for: "row 7")?.status == .loaded }
    for level in ["portal", "item", "thumbnail"] {
      let priority = try #require(seen[level])
      #expect(priority >= ClaimPriority.visible.taskPriority, "\(level) ran at \(priority)")
    }
    claim.end()
  }

  @Test func withoutARaiseTheChainStaysInTheBackground() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = AsyncLoadable<String> {
      try await gate.operation()
      seen.record("portal")
      return "portal"
    }
    let item = AsyncLoadable<String> { try await portal.fetchIfNeeded() + " item" }
    let thumbnails = ContentLoader<String, String, Int> { key in (try await item.fetchIfNeeded() + key, 1) }
    let claim = await Task(priority: .background) { thumbnails.begin("row 9", priority: .background) }.value
    await gate.waitForStart()
    gate.resolve(())
    await eventually { thumbnails.snapshot(for: "row 9")?.status == .loaded }
    #expect(try #require(seen["portal"]) < ClaimPriority.visible.taskPriority)
    claim.end()
  }
}
