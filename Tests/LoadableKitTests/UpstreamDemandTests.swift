@testable import LoadableKit
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

  /// Loads `loadable` from a background task, and once its attempt waits for `gate`, from a
  /// high-priority task that joins that attempt; then opens `gate` and waits for both.
  static func joinAtHighPriority<T: Sendable>(_ loadable: AsyncLoadable<T>, gate: ControlledLoad<Void>) async throws {
    let low = Task(priority: .background) { try await loadable.load() }
    try await gate.waitForStart()
    let high = Task(priority: .high) { try await loadable.load() }
    await eventually { loadable.waiterCount == 2 }
    gate.resolve(())
    try await high.value
    try await low.value
  }

  /// A portal that waits for `gate`, then records the priority it runs at. With `raisedTo`, it
  /// first waits (a bounded number of yields) for its task to be raised that far: a caller who
  /// joins raises the attempt just after it is seen to join.
  static func portal(held gate: ControlledLoad<Void>, seen: Seen, raisedTo: TaskPriority? = nil) -> AsyncLoadable<String> {
    AsyncLoadable<String>(name: "portal") {
      try await gate.operation()
      if let raisedTo { await waitUntilRaised(to: raisedTo) }
      seen.record("portal")
      return "portal"
    }
  }

  @Test func raisingAClaimRaisesTheAttemptsItsLoadWaitsFor() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = Self.portal(held: gate, seen: seen)
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
    try await gate.waitForStart()
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

  /// A `map`'s attempt has no task of its own (issue 13): a caller who joins it at a higher
  /// priority raises it through its driver, and so on to the task of the source at the bottom.
  @Test func aHigherPriorityCallerRaisesTheSourceThroughAChainOfMaps() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = Self.portal(held: gate, seen: seen, raisedTo: .high)
    let title = portal.map { "title of \($0)" }.map { $0.uppercased() }
    try await Self.joinAtHighPriority(title, gate: gate)
    #expect(title.content == "TITLE OF PORTAL")
    let priority = try #require(seen["portal"])
    #expect(priority >= .high, "the portal ran at \(priority)")
  }

  /// An attempt that awaits several declared dependencies from its task (`DependencyGroup`)
  /// passes its task's raise on to those it still waits for, as a task group's children would.
  @Test func aRaisedAttemptRaisesTheDependenciesItAwaitsTogether() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = Self.portal(held: gate, seen: seen, raisedTo: .high)
    let basemap = AsyncLoadable<String>(name: "basemap") { "basemap" }
    let map = AsyncLoadable<String>(name: "map") { "map" }
    map.addDependency(portal)
    map.addDependency(basemap)
    try await Self.joinAtHighPriority(map, gate: gate)
    let priority = try #require(seen["portal"])
    #expect(priority >= .high, "the portal ran at \(priority)")
  }

  @Test func withoutARaiseTheChainStaysInTheBackground() async throws {
    let seen = Seen()
    let gate = ControlledLoad<Void>()
    let portal = Self.portal(held: gate, seen: seen)
    let item = AsyncLoadable<String> { try await portal.fetchIfNeeded() + " item" }
    let thumbnails = ContentLoader<String, String, Int> { key in (try await item.fetchIfNeeded() + key, 1) }
    let claim = await Task(priority: .background) { thumbnails.begin("row 9", priority: .background) }.value
    try await gate.waitForStart()
    gate.resolve(())
    await eventually { thumbnails.snapshot(for: "row 9")?.status == .loaded }
    #expect(try #require(seen["portal"]) < ClaimPriority.visible.taskPriority)
    claim.end()
  }
}

@Suite("Upstream demand, deep", .timeLimit(.minutes(1)))
struct DeepUpstreamDemandTests {
  /// Escalating the top of a very long waiting chain does not escalate one level inside the other:
  /// the runtime calls each escalation handler within the escalated task's status lock.
  @Test func escalatingALongWaitingChainDoesNotRecurse() async throws {
    final class Link: AsyncLoadable<Int>, @unchecked Sendable {
      nonisolated(unsafe) var next: Link?
      let gate: ControlledLoad<Void>?
      init(gate: ControlledLoad<Void>?) {
        self.gate = gate
        super.init()
      }
      override func performLoad() async throws -> Int {
        if let next { return try await next.fetch() + 1 }
        try await gate!.operation()
        return 0
      }
    }
    let gate = ControlledLoad<Void>()
    let bottom = Link(gate: gate)
    var top = bottom
    let depth = 20_000
    var links = [bottom]
    for _ in 1..<depth {
      let link = Link(gate: nil)
      link.next = top
      top = link
      links.append(link)
    }
    let start = top
    let low = Task(priority: .background) { try await start.fetch() }
    try await gate.waitForStart()
    let high = Task(priority: .high) { try await start.fetch() }  // escalates the whole chain
    await eventually { start.waiterCount == 2 }
    gate.resolve(())
    #expect(try await high.value == depth - 1)
    #expect(try await low.value == depth - 1)
    for link in links { link.next = nil }
  }
}

/// Demand from the start (issue 27, SPEC §5): a dependency attempt begins at the priority its
/// dependent runs at *now*, raises included — not at the priority the dependent's task was
/// created with.
@Suite("Upstream demand from the start", .timeLimit(.minutes(1)))
struct UpstreamDemandFromTheStartTests {
  /// A row prefetched and made visible at once (the edge of the viewport): the thumbnail's load
  /// was launched for the prefetch and raised before it ran; the item and portal loads it then
  /// starts run at the visible priority from their first instruction. Everything runs on a
  /// manual executor, so nothing starts before both calls were made.
  @Test func aRowPrefetchedThenMadeVisibleStartsItsUpstreamLoadsAtTheVisiblePriority() async throws {
    let executor = ManualTaskExecutor()
    let seen = UpstreamDemandTests.Seen()
    let portal = AsyncLoadable<String>(name: "portal") {
      seen.record("portal")
      return "portal"
    }
    let item = AsyncLoadable<String>(name: "item") {
      seen.record("item")
      return "item of \(try await portal.fetchIfNeeded())"
    }
    let thumbnails = ContentLoader<String, String, Int>(idleTimeout: nil, taskExecutor: executor) { key in
      seen.record("thumbnail")
      return ("\(key) of \(try await item.fetchIfNeeded())", 1)
    }
    let prefetch = await Task(priority: .background) { thumbnails.prefetch(["row 3"]) }.value
    let claim = await Task(priority: .background) { thumbnails.begin("row 3", priority: .visible) }.value
    executor.runInOrder()
    #expect(claim.snapshot.status == .loaded)
    for level in ["thumbnail", "item", "portal"] {
      let priority = try #require(seen[level], "\(level) did not run")
      #expect(priority >= ClaimPriority.visible.taskPriority, "\(level) started at \(priority)")
    }
    claim.end()
    prefetch.cancel()
  }
}

/// A keyed upstream under a load limit is ranked by the highest demand of whoever waits for it,
/// claims and dependents alike, and drops back when that demand goes (SPEC §5). Items load one
/// at a time; a thumbnail's load waits for its item.
@Suite("Keyed upstream ranked by demand", .timeLimit(.minutes(1)))
struct KeyedUpstreamDemandTests {
  struct Rows {
    let started = Recorder<String>()
    let busy = ControlledLoad<Void>()
    let items: ContentLoader<String, String, Int>
    let thumbnails: ContentLoader<String, String, Int>

    init() {
      let started = started
      let busy = busy
      let items = ContentLoader<String, String, Int>(idleTimeout: nil, maximumConcurrentLoads: 1) { key in
        started.append(key)
        if key == "busy" { try await busy.operation() }
        return (key, 1)
      }
      self.items = items
      thumbnails = ContentLoader<String, String, Int>(idleTimeout: nil) { key in
        ("thumbnail of " + (try await items.loadable(for: "item \(key)").fetch()), 1)
      }
    }

    var waitingForASlot: Int { items.limiter?.waitingCount ?? 0 }

    /// The busy item's load takes the one slot, and is held there.
    func holdTheSlot() async throws -> ContentLoader<String, String, Int>.Claim {
      let claim = items.begin("busy")
      try await busy.waitForStart()
      return claim
    }

    /// ``holdTheSlot()``, then thumbnail t is prefetched: its item waits for the slot.
    func holdTheSlotAndPrefetchT() async throws -> (
      busy: ContentLoader<String, String, Int>.Claim, prefetch: ContentLoader<String, String, Int>.Prefetch
    ) {
      let claim = try await holdTheSlot()
      let prefetch = thumbnails.prefetch(["t"])
      await eventually { waitingForASlot == 1 }
      return (claim, prefetch)
    }

    /// Whether anybody's demand is still recorded on `key`'s load (nobody waits for it any more
    /// once it loaded).
    func demandIsLeftOn(_ key: String) -> Bool {
      guard let entry = items.loadable(for: key) as? ContentLoader<String, String, Int>.KeyedLoadable else { return true }
      return items.withState { _ in entry.waiting != nil }
    }

    /// The item loads started after the busy one, once `count` of them did.
    func startedAfterBusy(_ count: Int) async -> [String] {
      await eventually { started.count == count + 1 }
      return Array(started.values.dropFirst())
    }
  }

  /// A thumbnail only prefetched waits for its item at the prefetch rank: a visible item claimed
  /// later goes first.
  @Test func anUpstreamWantedOnlyByAPrefetchWaitsBehindAVisibleClaim() async throws {
    let rows = Rows()
    let (busy, prefetch) = try await rows.holdTheSlotAndPrefetchT()
    let visible = rows.items.begin("item v")
    #expect(rows.waitingForASlot == 2)
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item v", "item t"])
    visible.end()
    prefetch.cancel()
    busy.end()
  }

  /// The thumbnail made visible raises its waiting item to the visible rank (first come among
  /// equals: it waited longer than the other visible item).
  @Test func aDependentMadeVisibleRaisesItsUpstream() async throws {
    let rows = Rows()
    let (busy, prefetch) = try await rows.holdTheSlotAndPrefetchT()
    let visible = rows.items.begin("item v")
    let row = rows.thumbnails.begin("t", priority: .visible)
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item t", "item v"])
    row.end()
    visible.end()
    prefetch.cancel()
    busy.end()
  }

  /// ... and drops it back when the visible claim that raised it ends.
  @Test func anUpstreamDropsBackWhenTheDemandThatRaisedItGoes() async throws {
    let rows = Rows()
    let (busy, prefetch) = try await rows.holdTheSlotAndPrefetchT()
    let visible = rows.items.begin("item v")
    let row = rows.thumbnails.begin("t", priority: .visible)
    row.end()  // scrolled away again: only the prefetch wants the thumbnail
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item v", "item t"])
    visible.end()
    prefetch.cancel()
    busy.end()
  }

  /// The same through declared dependencies: the thumbnail key's loadable depends on its item
  /// and on a style (`addDependency`), which its attempt awaits as a dependency group, not with
  /// calls.
  @Test func aDeclaredDependencyIsRankedByItsDependentsDemandToo() async throws {
    let rows = Rows()
    let busy = try await rows.holdTheSlot()
    let declared = ContentLoader<String, String, Int>(idleTimeout: nil) { key in ("thumbnail of \(key)", 1) }
    let row = declared.loadable(for: "t")  // held: the dependency is the loadable's
    row.addDependency(rows.items.loadable(for: "item t"))
    let style = AsyncLoadable<String>(name: "style") { "style" }
    row.addDependency(style)
    let prefetch = declared.prefetch(["t"])
    await eventually { rows.waitingForASlot == 1 }
    let visible = rows.items.begin("item v")
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item v", "item t"])
    await eventually { declared.snapshot(for: "t")?.status == .loaded }
    #expect(rows.items.loadable(for: "item t").loadStatus == .loaded)
    #expect(!rows.demandIsLeftOn("item t"))
    _ = row
    visible.end()
    prefetch.cancel()
    busy.end()
  }

  /// A `map` over a key's loadable waits for it without a task (a dependency group, which ends
  /// its attempt on the thread the key's load ends on): by the time the map's status says
  /// loaded, its demand on the key is gone, as a task's wait ends before the task goes on. (The
  /// group told the key only after handing its outcome on: the map's observer saw the demand
  /// still there, every time.)
  @Test func aMapsDemandOnTheKeyIsGoneWhenItsStatusSaysLoaded() async throws {
    let rows = Rows()
    let row = rows.items.loadable(for: "item t").map { "row of \($0)" }
    let demandWhenLoaded = Recorder<Bool>()
    let observation = row.observeLoadStatus { status in
      if status == .loaded { demandWhenLoaded.append(rows.demandIsLeftOn("item t")) }
    }
    let busy = try await rows.holdTheSlot()
    let load = Task { try await row.load() }
    await eventually { rows.waitingForASlot == 1 }  // the item's load waits, with the map's demand
    #expect(rows.demandIsLeftOn("item t"))
    rows.busy.resolve(())
    try await load.outcome
    #expect(demandWhenLoaded.values == [false])
    #expect(row.content == "row of item t")
    observation.cancel()
    busy.end()
  }

  /// A plain caller of an item waits at the visible rank, as before: a prefetch-only dependent
  /// does not lower it.
  @Test func aPlainCallerKeepsTheUpstreamVisible() async throws {
    let rows = Rows()
    let (busy, prefetch) = try await rows.holdTheSlotAndPrefetchT()
    let caller = Task { try await rows.items.loadable(for: "item t").fetch() }
    await eventually { rows.items.loadable(for: "item t").waiterCount == 2 }
    let visible = rows.items.begin("item v")
    rows.busy.resolve(())
    #expect(await rows.startedAfterBusy(2) == ["item t", "item v"])
    #expect(try await caller.value == "item t")
    await eventually { rows.thumbnails.snapshot(for: "t")?.status == .loaded }
    #expect(!rows.demandIsLeftOn("item t"))
    visible.end()
    prefetch.cancel()
    busy.end()
  }
}
