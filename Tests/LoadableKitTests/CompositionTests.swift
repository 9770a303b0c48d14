@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("Dependencies: the ArcGIS scenarios", .timeLimit(.minutes(1)))
struct DependencyScenarioTests {
  @Test func aMapLoadsWhenAnIncidentalLayerFails() async throws {
    let basemap = AsyncLoadable { "basemap" }
    let trails = AsyncLoadable<String> { throw Boom(code: 404) }
    let map = AsyncLoadable { "map" }
    map.addDependency(basemap)
    map.addDependency(trails, kind: .incidental)
    try await map.load()
    #expect(map.loadStatus == .loaded)
    #expect(basemap.loadStatus == .loaded)
    await eventually { trails.loadStatus == .failed }
    #expect(trails.loadError as? Boom == Boom(code: 404))
    #expect(map.dependencies.map(\.kind) == [.required, .incidental])
  }

  @Test func aFeatureLayerFailsWithItsTablesErrorAndRetryRetriesTheTable() async throws {
    let table = ControlledLoad<String>()
    let featureTable = table.makeLoadable()
    let layer = featureTable.map { "layer over \($0)" }
    let load = Task { try await layer.load() }
    try await table.waitForStart()
    table.fail(Boom(code: 500))
    await #expect(throws: Boom(code: 500)) { try await load.value }
    #expect(layer.loadStatus == .failed)
    #expect(layer.loadError as? Boom == Boom(code: 500))
    // load() on the layer is sticky and does not touch the table.
    await #expect(throws: Boom(code: 500)) { try await layer.load() }
    #expect(table.startCount == 1)
    // retryLoad() cascades to the failed table.
    let retry = Task { try await layer.retryLoad() }
    try await table.waitForStart(2)
    table.resolve("parks")
    try await retry.value
    #expect(layer.content == "layer over parks")
    #expect(featureTable.loadStatus == .loaded)
  }

  @Test func retryCascadesAllTheWayUp() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    let item = portalLoadable.map { "item in \($0)" }
    let layer = item.map { "layer from \($0)" }
    let first = Task { try await layer.load() }
    try await portal.waitForStart()
    portal.fail(Boom(code: 503))
    await #expect(throws: Boom(code: 503)) { try await first.value }
    #expect(item.loadStatus == .failed)
    let retry = Task { try await layer.retryLoad() }
    try await portal.waitForStart(2)
    portal.resolve("portal")
    try await retry.value
    #expect(layer.content == "layer from item in portal")
    #expect(item.loadStatus == .loaded)
  }

  @Test func cancellingTheMapStopsAPortalLoadOnlyItNeeded() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    let map = AsyncLoadable { "map" }
    map.addDependency(portalLoadable)
    let load = Task { try await map.load() }
    try await portal.waitForStart()
    #expect(portalLoadable.loadStatus == .loading)
    map.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.value }
    await eventually { portal.cancelledCount == 1 }
    await eventually { portalLoadable.loadStatus == .notLoaded }
    #expect(portalLoadable.loadError == nil, "nobody asked the portal to cancel: it is not left failed")
    // The next screen can load it normally.
    let next = Task { try await portalLoadable.fetch() }
    try await portal.waitForStart(2)
    portal.resolve("portal")
    #expect(try await next.value == "portal")
  }

  @Test func cancellingTheMapLeavesAPortalLoadAnotherCallerWaitsFor() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    let map = AsyncLoadable { "map" }
    map.addDependency(portalLoadable)
    let mapLoad = Task { try await map.load() }
    try await portal.waitForStart()
    let other = Task { try await portalLoadable.fetch() }
    await eventually { portalLoadable.waiterCount == 2 }
    map.cancelLoad()
    await #expect(throws: CancellationError.self) { try await mapLoad.value }
    #expect(portalLoadable.loadStatus == .loading)
    #expect(portal.cancelledCount == 0)
    portal.resolve("portal")
    #expect(try await other.value == "portal")
  }

  @Test func anAttemptStartedBySyncIsNotCancelledByTheCascade() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    portalLoadable.sync()
    try await portal.waitForStart()
    let map = AsyncLoadable { "map" }
    map.addDependency(portalLoadable)
    let mapLoad = Task { try await map.load() }
    await eventually { portalLoadable.waiterCount == 1 }
    map.cancelLoad()
    await #expect(throws: CancellationError.self) { try await mapLoad.value }
    #expect(portalLoadable.loadStatus == .loading)
    portal.resolve("portal")
    await eventually { portalLoadable.loadStatus == .loaded }
    #expect(portal.cancelledCount == 0)
  }

  /// Each link goes back to what it was, the root's task is cancelled, and the top fails. Past
  /// the trampoline's depth (32) the cascade goes on from the bottom of the same stack, before
  /// the outermost step returns: until issue 13 it went on on new tasks, and the deeper links were
  /// restored a moment after `cancelLoad()` returned.
  @Test(arguments: [100, 1_000])
  func cancelCascadesDownAChainAndRestoresEachLinkBeforeCancelLoadReturns(length: Int) async throws {
    let root = ControlledLoad<Int>()
    var chain: [AsyncLoadable<Int>] = [root.makeLoadable()]
    for _ in 0..<length { chain.append(chain.last!.map { $0 + 1 }) }
    let top = chain.last!
    let load = Task { try await top.load() }
    try await root.waitForStart()
    // Loading, and each link's attempt set up: a `map`'s attempt attaches its driver once its
    // wait on its source returned, and the root's start is inside the last links' waits. A cancel
    // that reaches a link before that is carried out by the thread setting it up, when it attaches
    // the driver, not by `cancelLoad()` (the 4 links of the last trampoline batch of 100 were seen
    // still loading so once, under ThreadSanitizer on a busy machine).
    await eventually { chain.allSatisfy { $0.loadStatus == .loading && $0.runnerIsAttachedForTesting } }
    top.cancelLoad()
    let stillLoading = chain.dropLast().filter { $0.loadStatus != .notLoaded }.count
    #expect(stillLoading == 0, "every link below the top is back to .notLoaded")
    #expect(top.loadStatus == .failed)
    await #expect(throws: CancellationError.self) { try await load.value }
    await eventually { root.cancelledCount == 1 }
  }

  @Test func aRequiredDependencyThatIsNotAnAsyncLoadable() async throws {
    final class Legacy: Loadable, @unchecked Sendable {
      let calls = Recorder<String>()
      var loadStatus: LoadStatus { .loaded }
      var loadError: (any Error)? { nil }
      func load() async throws { calls.append("load") }
      func retryLoad() async throws { calls.append("retry") }
      func cancelLoad() { calls.append("cancel") }
    }
    let legacy = Legacy()
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    loadable.addDependency(legacy)
    let first = Task { try await loadable.fetch() }
    try await control.waitForStart()
    control.fail(Boom())
    _ = await first.result
    let retry = Task { try await loadable.retryLoad() }
    try await control.waitForStart(2)
    control.resolve(1)
    try await retry.value
    let refresh = Task { try await loadable.fetch() }
    try await control.waitForStart(3)
    control.resolve(2)
    _ = try await refresh.value
    #expect(legacy.calls.values == ["load", "retry", "load"])
  }
}

@Suite("Intent", .timeLimit(.minutes(1)))
struct IntentTests {
  @Test func aRefreshOfTheDerivedRefreshesTheParentAndIfNeededDoesNot() async throws {
    let (parent, control) = try await makeLoadable(in: .loaded)
    let derived = parent.map { $0 * 10 }
    #expect(derived.loadStatus == .loaded, "loaded at once over a loaded parent")
    #expect(derived.content == 10)
    #expect(try await derived.fetchIfNeeded() == 10)
    #expect(control.startCount == 1)
    let refresh = Task { try await derived.fetch() }
    try await control.waitForStart(2)
    control.resolve(2)
    #expect(try await refresh.value == 20)
  }

  @Test func eachDependencyGetsTheIntentOncePerAttempt() async throws {
    final class Item: AsyncLoadable<String>, @unchecked Sendable {
      let portal: AsyncLoadable<Int>
      init(portal: AsyncLoadable<Int>) {
        self.portal = portal
        super.init()
        addDependency(portal)
      }
      override func performLoad() async throws -> String {
        let first = try await loadDependency(portal)
        let second = try await loadDependency(portal)
        return "\(first)-\(second)"
      }
    }
    let (portal, control) = try await makeLoadable(in: .loaded)
    let item = Item(portal: portal)
    try await item.load()
    #expect(item.content == "1-1")
    #expect(control.startCount == 1, "load() does not refresh a loaded dependency")
    let refresh = Task { try await item.fetch() }
    try await control.waitForStart(2)
    control.resolve(2)
    #expect(try await refresh.value == "2-2")
    #expect(control.startCount == 2, "refreshed once, though declared and asked for twice")
  }

  @Test func flatMapPassesARetryToTheLoadableItsTransformReturns() async throws {
    let tableControl = ControlledLoad<String>()
    let table = tableControl.makeLoadable()
    let layer = AsyncLoadable { 7 }
    let transforms = Counter()
    let tableOfLayer = layer.flatMap { _ in
      transforms.increment()
      return table
    }
    #expect(tableOfLayer.loadStatus == .notLoaded, "derived loads are lazy")
    #expect(tableControl.startCount == 0)
    let first = Task { try await tableOfLayer.load() }
    try await tableControl.waitForStart()
    tableControl.fail(Boom(code: 1))
    await #expect(throws: Boom(code: 1)) { try await first.value }
    let retry = Task { try await tableOfLayer.retryLoad() }
    try await tableControl.waitForStart(2)
    tableControl.resolve("table")
    try await retry.value
    #expect(tableOfLayer.content == "table")
    #expect(transforms.count == 2, "the transform runs on each attempt")
  }
}

@Suite("Combinators", .timeLimit(.minutes(1)))
struct CombinatorTests {
  @Test func derivedLoadablesAreLazy() async throws {
    let control = ControlledLoad<Int>()
    let parent = control.makeLoadable()
    let derived = [
      parent.map { $0 }, parent.asyncMap { $0 }, parent.flatMap { AsyncLoadable(content: $0) },
      parent.joined { AsyncLoadable(content: $0) }.map { $0.0 }, zip(parent, parent).map { $0.0 },
    ]
    #expect(derived.allSatisfy { $0.loadStatus == .notLoaded })
    #expect(parent.loadStatus == .notLoaded)
    #expect(control.startCount == 0)
  }

  @Test func mapOfALoadedParentIsLoadedAtOnceAndOfAFailedParentFailed() async throws {
    let loaded = AsyncLoadable(content: 3).map { $0 * 2 }
    #expect(loaded.loadStatus == .loaded)
    #expect(loaded.content == 6)
    let failing = AsyncLoadable(content: 3).map { _ -> Int in throw Boom(code: 7) }
    #expect(failing.loadStatus == .failed)
    #expect(failing.loadError as? Boom == Boom(code: 7))
    let failedParent = AsyncLoadable<Int>(error: Boom(code: 8)).map { $0 }
    #expect(failedParent.loadStatus == .failed)
    await #expect(throws: Boom(code: 8)) { try await failedParent.load() }
  }

  @Test func errorsFromTheClosureAndTheParentPropagate() async throws {
    let parent = AsyncLoadable<Int> { throw Boom(code: 1) }
    await #expect(throws: Boom(code: 1)) { try await parent.map { $0 }.fetch() }
    await #expect(throws: Boom(code: 1)) { try await parent.asyncMap { $0 }.fetch() }
    let good = AsyncLoadable { 1 }
    await #expect(throws: Boom(code: 2)) { try await good.map { _ -> Int in throw Boom(code: 2) }.fetch() }
    await #expect(throws: Boom(code: 3)) { try await good.asyncMap { _ -> Int in throw Boom(code: 3) }.fetch() }
    await #expect(throws: Boom(code: 4)) {
      try await good.flatMap { _ -> AsyncLoadable<Int> in throw Boom(code: 4) }.fetch()
    }
    await #expect(throws: Boom(code: 5)) {
      try await good.joined { _ in AsyncLoadable<Int>(error: Boom(code: 5)) }.fetch()
    }
  }

  @Test func joinedYieldsBothContents() async throws {
    let item = AsyncLoadable { "item" }
    let pair = try await item.joined { name in AsyncLoadable { name.count } }.fetch()
    #expect(pair.0 == "item")
    #expect(pair.1 == 4)
  }

  @Test func zipCombinesAndZipOfOneIsMap() async throws {
    let zipped = try await zip(AsyncLoadable { 1 }, AsyncLoadable { "two" }, AsyncLoadable { 3.0 }).fetch()
    #expect(zipped.0 == 1 && zipped.1 == "two" && zipped.2 == 3.0)
    let single: AsyncLoadable<Int> = zip(AsyncLoadable(content: 5))
    #expect(single.loadStatus == .loaded)
    #expect(single.content == 5)
    let array = try await zip([AsyncLoadable { 1 }, AsyncLoadable { 2 }]).fetch()
    #expect(array == [1, 2])
    #expect(try await zip([AsyncLoadable<Int>]()).fetch() == [])
  }

  /// With load options, a zip's attempt runs on a task and combines the loaded elements there
  /// (`performLoad`), not in its attempt without a task: the same contents, in order.
  @Test func aZipWithLoadOptionsCombinesOnItsTaskInOrder() async throws {
    let pair = zip(AsyncLoadable { 1 }, AsyncLoadable { 2 })
    pair.loadOptions = LoadOptions(timeout: .seconds(60))
    let loaded = try await pair.fetch()
    #expect(loaded.0 == 1 && loaded.1 == 2)
    let triple = zip(AsyncLoadable { 1 }, AsyncLoadable { "two" }, AsyncLoadable { 3.0 })
    triple.loadOptions = LoadOptions(timeout: .seconds(60))
    let three = try await triple.fetch()
    #expect(three.0 == 1 && three.1 == "two" && three.2 == 3.0)
    let array = zip([AsyncLoadable { 1 }, AsyncLoadable { 2 }])
    array.loadOptions = LoadOptions(timeout: .seconds(60))
    #expect(try await array.fetch() == [1, 2])
  }

  @Test func zipFailsFastAndCancelsTheSiblingsItStarted() async throws {
    let slow = ControlledLoad<Int>()
    let slowLoadable = slow.makeLoadable()
    let failing = ControlledLoad<Int>()
    let failingLoadable = failing.makeLoadable()
    let zipped = zip(slowLoadable, failingLoadable)
    let load = Task { try await zipped.load() }
    try await slow.waitForStart()
    try await failing.waitForStart()
    failing.fail(Boom(code: 9))
    await #expect(throws: Boom(code: 9)) { try await load.value }
    await eventually { slow.cancelledCount == 1 }
    await eventually { slowLoadable.loadStatus == .notLoaded }
    #expect(zipped.loadError as? Boom == Boom(code: 9))
  }

  @Test func aMapIsALiveViewAndOtherDerivedLoadablesGoStale() async throws {
    let (parent, control) = try await makeLoadable(in: .loaded)
    let doubled = parent.map { $0 * 2 }
    let asyncDoubled = parent.asyncMap { $0 * 2 }
    try await asyncDoubled.load()
    #expect(asyncDoubled.content == 2)
    #expect(!asyncDoubled.needsSync)
    #expect(!doubled.needsSync)
    parent.sync()
    try await control.waitForStart(2)
    control.resolve(5)
    await eventually { doubled.content == 10 }
    #expect(doubled.loadStatus == .loaded)
    #expect(!doubled.needsSync)
    #expect(asyncDoubled.content == 2)
    #expect(asyncDoubled.needsSync, "stale until it loads again")
    #expect(try await asyncDoubled.fetchIfNeeded() == 10)
    #expect(!asyncDoubled.needsSync)
    #expect(control.startCount == 2, "the parent was current, so it was not refreshed again")
  }

  @Test func aLiveMapFailsWhenItsTransformThrowsOnNewContent() async throws {
    let (parent, control) = try await makeLoadable(in: .loaded)
    let checked = parent.map { value -> Int in
      if value > 3 { throw Boom(code: value) }
      return value
    }
    #expect(checked.content == 1)
    parent.sync()
    try await control.waitForStart(2)
    control.resolve(4)
    await eventually { checked.loadStatus == .failed }
    #expect(checked.loadError as? Boom == Boom(code: 4))
    #expect(checked.content == 1, "the old content is kept")
  }

  @Test func aChainOfTenThousandMapsLoadsAndUpdates() async throws {
    let (root, control) = try await makeLoadable(in: .notLoaded)
    var top = root
    for _ in 0..<10_000 { top = top.map { $0 + 1 } }
    let chainTop = top
    let load = Task { try await chainTop.fetch() }
    try await control.waitForStart()
    control.resolve(0)
    #expect(try await load.value == 10_000)
    // The update climbs 10,000 live views: awaited through a live view of the top, not polled.
    // Under ThreadSanitizer it takes 1.3-2.1 s here, 84,000-121,000 of `eventually`'s 200,000
    // yields, and a fresh-clone CI run (9d132f2) ran out of them; a lost update still fails, at
    // the suite's time limit.
    let (tops, topSink) = AsyncStream<Int>.makeStream()
    let watcher = chainTop.map { value in
      topSink.yield(value)
      return value
    }
    root.sync()
    try await control.waitForStart(2)
    control.resolve(1)
    for await value in tops where value == 10_001 { break }
    #expect(chainTop.content == 10_001)
    // (The watcher's own content is committed after its transform ran: not read here.)
    withExtendedLifetime(watcher) {}
  }

  @Test func aZipOfTenThousand() async throws {
    let loadables = (0..<10_000).map { index in AsyncLoadable { index } }
    let all = try await zip(loadables).fetch()
    #expect(all == Array(0..<10_000))
  }

  @Test func loadAllReportsEachOutcome() async {
    let loadables: [any Loadable] = [AsyncLoadable { 1 }, AsyncLoadable<Int> { throw Boom(code: 2) }, AsyncLoadable { 3 }]
    let outcomes = await loadAll(loadables)
    #expect(outcomes.count == 3)
    #expect((try? outcomes[0].get()) != nil)
    #expect(throws: Boom(code: 2)) { try outcomes[1].get() }
    #expect((try? outcomes[2].get()) != nil)
  }
}

@Suite("Cycles", .timeLimit(.minutes(1)))
struct CycleTests {
  @Test func aLoadableThatDependsOnItselfFails() async {
    let loadable = AsyncLoadable { 1 }
    loadable.addDependency(loadable)
    await #expect(throws: LoadableError.dependencyCycle) { try await loadable.load() }
  }

  @Test func aTwoNodeCycleFailsBothWithoutHanging() async {
    let a = AsyncLoadable { "a" }
    let b = AsyncLoadable { "b" }
    a.addDependency(b)
    b.addDependency(a)
    await #expect(throws: LoadableError.dependencyCycle) { try await a.load() }
    #expect(a.loadStatus == .failed)
    #expect(b.loadStatus == .failed)
    #expect(b.loadError as? LoadableError == .dependencyCycle)
  }

  /// A cycle of 12 is found too: the walk keeps the nodes it saw past its first four in a set.
  @Test(arguments: [5, 12])
  func aCycleThroughLoadDependencyFails(length: Int) async {
    final class Node: AsyncLoadable<Int>, @unchecked Sendable {
      nonisolated(unsafe) var next: Node?
      override func performLoad() async throws -> Int { try await loadDependency(next!) + 1 }
    }
    let nodes = (0..<length).map { _ in Node() }
    for (index, node) in nodes.enumerated() { node.next = nodes[(index + 1) % nodes.count] }
    let load = Task { try await nodes[0].load() }
    await #expect(throws: LoadableError.dependencyCycle) { try await load.outcome }
    for node in nodes { node.next = nil }
  }

  /// A wait that returned is no longer an edge of the wait-for graph: once `a`'s attempt has its
  /// answer from `b`, `b`'s next attempt may wait for `a`, which is still running.
  @Test func aWaitThatReturnedIsNoLongerAnEdge() async throws {
    final class Node: AsyncLoadable<Int>, @unchecked Sendable {
      let step = Mutex<(@Sendable (Node) async throws -> Int)?>(nil)
      override func performLoad() async throws -> Int { try await step.withLock { $0 }!(self) }
    }
    let a = Node()
    let b = Node()
    let gate = ControlledLoad<Int>()
    let gated = gate.makeLoadable()
    b.step.withLock { $0 = { _ in 1 } }
    a.step.withLock {
      $0 = { node in
        let first = try await node.loadDependency(b)  // an edge a → b, until b answers
        return try await first + node.loadDependency(gated)  // then a waits for `gated` alone
      }
    }
    let aLoad = Task { try await a.load() }
    try await gate.waitForStart()
    b.step.withLock { $0 = { node in try await node.loadDependency(a) } }
    let bRefresh = Task { try await b.fetch() }
    // b's attempt waits for a (a second waiter of a's attempt), or failed at once as a cycle.
    await eventually { a.storedWaiterSlotCount == 2 || b.loadStatus == .failed }
    #expect(b.loadError == nil)
    gate.resolve(10)
    try await aLoad.value
    #expect(try await bRefresh.value == 11)
    #expect(a.content == 11)
    #expect(b.content == 11)
  }

  /// The same for a `map`'s wait, which has no task: once the source answered, while the view's
  /// attempt is still ending (its content derived, not yet committed), the wait is no longer an
  /// edge, so the source's next attempt may wait for the view.
  @Test func aMapsWaitThatReturnedIsNoLongerAnEdge() async throws {
    let source = AsyncLoadable { 1 }
    let view = source.map { $0 * 10 }
    let cycleFound = Mutex<Bool?>(nil)
    try await LiveViewSeams.withHook(
      afterDerivationRecordedBy: view,
      {
        // What the source's next attempt does to wait for the view (`loadDependency`): record the
        // edge source → view, walking from the view's attempt, which is still running.
        let next = AttemptContext(owner: source, intent: .load, attemptID: 0, onTask: false)
        do {
          try next.beginWait(on: view)
          next.endWait(on: view)
          cycleFound.withLock { $0 = false }
        } catch {
          cycleFound.withLock { $0 = true }
        }
      }
    ) {
      try await view.load()
    }
    #expect(cycleFound.withLock { $0 } == false)
    #expect(view.content == 10)
  }

  @Test func incidentalEdgesNeverFormACycle() async throws {
    let a = AsyncLoadable { "a" }
    let b = AsyncLoadable { "b" }
    a.addDependency(b, kind: .incidental)
    b.addDependency(a, kind: .incidental)
    try await a.load()
    await eventually { b.loadStatus == .loaded }
  }
}

@Suite("Dependency tree", .timeLimit(.minutes(1)))
struct DependencyTreeTests {
  @Test func describesStatusesKindsAndErrors() async throws {
    let table = AsyncLoadable { "table" }.named("parks table")
    let parks = table.map { $0 }.named("parks")
    let trails = AsyncLoadable<String> { throw Boom(code: 404) }.named("trails")
    let map = AsyncLoadable { "map" }.named("map")
    map.addDependency(parks)
    map.addDependency(trails, kind: .incidental)
    try await map.load()
    await eventually { trails.loadStatus == .failed }
    let lines = map.dependencyTreeDescription.split(separator: "\n").map(String.init)
    #expect(lines.count == 4)
    #expect(lines[0].hasPrefix("map [loaded "))
    #expect(lines[1].hasPrefix("├─ parks [loaded "))
    #expect(lines[2].hasPrefix("│  └─ parks table [loaded "))
    #expect(lines[3] == "└─ trails [failed: Boom(code: 404)] (incidental)")
  }
}

@Suite("Overridable", .timeLimit(.minutes(1)))
struct OverridableTests {
  @Test func anOverrideWinsBeforeAndAfterTheLoad() {
    let minScale = Overridable<Double>(0)
    #expect(minScale.value == 0)
    minScale.value = 5_000
    minScale.setLoadedValue(100)
    #expect(minScale.value == 5_000)
    #expect(minScale.isOverridden)
    #expect(minScale.loadedValue == 100)
    minScale.removeOverride()
    #expect(minScale.value == 100)
    #expect(!minScale.isOverridden)
    minScale.value = 7
    #expect(minScale.value == 7)
  }

  @Test func nilIsAnOverrideForOptionalValues() {
    let title = Overridable<String?>("untitled")
    title.setLoadedValue("Parks")
    #expect(title.value == "Parks")
    title.value = nil
    #expect(title.value == nil)
    #expect(title.isOverridden)
    title.removeOverride()
    #expect(title.value == "Parks")
  }
}

@Suite("Ordering", .timeLimit(.minutes(1)))
struct OrderingTests {
  @Test func aCallerReturnsAfterLiveViewsAndObserversWereUpdated() async throws {
    for round in 0..<500 {
      let parent = AsyncLoadable { round }
      try await parent.load()
      let mapped = parent.map { $0 + 1 }
      let seen = Recorder<LoadStatus>()
      let observation = parent.observeLoadStatus { seen.append($0) }
      _ = try await parent.fetch()
      #expect(mapped.content == round + 1, "round \(round)")
      #expect(seen.values == [.loaded, .loading, .loaded], "round \(round)")
      observation.cancel()
    }
  }
}

@Suite("Discovered dependencies", .timeLimit(.minutes(1)))
struct DiscoveredDependencyTests {
  @Test func performLoadCanStartIncidentalDependenciesWithItsIntent() async throws {
    final class WebMap: AsyncLoadable<Int>, @unchecked Sendable {
      let layer: AsyncLoadable<String>
      init(layer: AsyncLoadable<String>) {
        self.layer = layer
        super.init()
      }
      override func performLoad() async throws -> Int {
        startIncidentalDependency(layer)  // discovered in the web map's content
        return 1
      }
    }
    let control = ControlledLoad<String>()
    let layer = control.makeLoadable()
    let map = WebMap(layer: layer)
    try await map.load()  // does not wait for the layer
    #expect(map.loadStatus == .loaded)
    try await control.waitForStart()
    control.fail(Boom(code: 404))
    await eventually { layer.loadStatus == .failed }
    #expect(map.loadStatus == .loaded)
    // A refresh of the map refreshes the layer it discovers, which starts the failed layer again.
    let retry = Task { try await map.fetch() }
    try await control.waitForStart(2)
    control.resolve("layer")
    _ = try await retry.value
    await eventually { layer.loadStatus == .loaded }
  }

  @Test func dependenciesListTheLoadableAFlatMapReturned() async throws {
    let table = AsyncLoadable { "table" }.named("table")
    let layer = AsyncLoadable { 1 }.named("layer")
    let tableOfLayer = layer.flatMap { _ in table }.named("table of layer")
    #expect(tableOfLayer.dependencies.count == 1)
    try await tableOfLayer.load()
    #expect(tableOfLayer.dependencies.map { ObjectIdentifier($0.loadable) } == [ObjectIdentifier(layer), ObjectIdentifier(table)])
    #expect(tableOfLayer.dependencyTree(showingDurations: false) == """
      table of layer [loaded]
      ├─ layer [loaded]
      └─ table [loaded]
      """)
  }
}

@Suite("Cascade interest", .timeLimit(.minutes(1)))
struct CascadeInterestTests {
  /// A `map` cancelled once its source's attempt has ended, while the source still tells its
  /// observers (its waiters are resumed after), ends cancelled without running its transform: the
  /// cancel decides the map's attempt, as it does while the source still loads.
  @Test func aMapCancelledWhileItsSourceTellsItsObserversDoesNotRunItsTransform() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let transforms = Mutex(0)
    let view = source.map { value -> Int in
      transforms.withLock { $0 += 1 }
      return value * 10
    }
    let observation = source.observeLoadStatus { status in
      if status == .loaded { view.cancelLoad() }
    }
    defer { observation.cancel() }
    let load = Task { try await view.load() }
    try await control.waitForStart()
    control.resolve(1)
    await #expect(throws: CancellationError.self) { try await load.value }
    #expect(source.content == 1)
    #expect(view.loadStatus == .failed)
    #expect(transforms.withLock { $0 } == 0)
  }

  @Test func aCallerWhoJoinedAndLeftDoesNotKeepTheDependencyAttemptAlive() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    let map = AsyncLoadable { "map" }
    map.addDependency(portalLoadable)
    let mapLoad = Task { try await map.load() }
    try await portal.waitForStart()
    let visitor = Task { try await portalLoadable.load() }
    await eventually { portalLoadable.waiterCount == 2 }
    visitor.cancel()
    await #expect(throws: CancellationError.self) { try await visitor.value }
    #expect(portalLoadable.loadStatus == .loading, "the map still waits for it")
    map.cancelLoad()
    await #expect(throws: CancellationError.self) { try await mapLoad.value }
    await eventually { portal.cancelledCount == 1 }
    await eventually { portalLoadable.loadStatus == .notLoaded }
  }
}
