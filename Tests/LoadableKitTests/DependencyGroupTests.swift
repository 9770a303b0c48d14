@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// An attempt with several required dependencies awaits them from its own task, one waiter on
/// each (`DependencyGroup`), with a task group's rules: concurrent loads, the first failure fails
/// the attempt and withdraws the other waits, a cancel withdraws them all.
@Suite("Dependencies: several required at once", .timeLimit(.minutes(1)))
struct DependencyGroupTests {
  /// A map with `count` controlled layers as its required dependencies, being loaded by `load`;
  /// returns once every layer's load has started.
  func loadingMap(over count: Int) async throws -> (
    loads: [ControlledLoad<String>], layers: [AsyncLoadable<String>], map: AsyncLoadable<String>,
    load: Task<Void, any Error>
  ) {
    let loads = (0..<count).map { _ in ControlledLoad<String>() }
    let layers = loads.map { $0.makeLoadable() }
    let map = AsyncLoadable { "map" }
    for layer in layers { map.addDependency(layer) }
    let load = Task { try await map.load() }
    for control in loads { try await control.waitForStart() }
    return (loads, layers, map, load)
  }

  @Test func theDependenciesLoadTogetherAndTheAttemptWaitsForAll() async throws {
    let (loads, layers, map, load) = try await loadingMap(over: 3)
    loads[2].resolve("c")
    loads[0].resolve("a")
    await eventually { layers[0].loadStatus == .loaded && layers[2].loadStatus == .loaded }
    #expect(map.loadStatus == .loading, "one dependency is still loading")
    loads[1].resolve("b")
    try await load.outcome
    #expect(map.loadStatus == .loaded)
    #expect(layers.allSatisfy { $0.waiterCount == 0 })
  }

  @Test func theFirstFailureFailsTheAttemptAndPutsBackWhatOnlyItWanted() async throws {
    let (loads, layers, map, load) = try await loadingMap(over: 3)
    loads[1].fail(Boom(code: 7))
    await #expect(throws: Boom(code: 7)) { try await load.outcome }
    // Withdrawn before the attempt failed, as a task group's cancelled children have returned
    // before it throws: the others are back as they were the moment the caller hears.
    #expect(layers[0].loadStatus == .notLoaded)
    #expect(layers[2].loadStatus == .notLoaded)
    #expect(layers[0].loadError == nil && layers[2].loadError == nil)
    #expect(layers[1].loadStatus == .failed)
    await eventually { loads[0].cancelledCount == 1 && loads[2].cancelledCount == 1 }
    #expect(map.loadError as? Boom == Boom(code: 7))
  }

  @Test func aFailureLeavesLoadingWhatAnotherCallerWaitsFor() async throws {
    let (loads, layers, _, load) = try await loadingMap(over: 2)
    let other = Task { try await layers[1].fetch() }
    await eventually { layers[1].waiterCount == 2 }
    loads[0].fail(Boom(code: 1))
    await #expect(throws: Boom(code: 1)) { try await load.outcome }
    #expect(layers[1].loadStatus == .loading)
    #expect(layers[1].waiterCount == 1, "the map's wait is withdrawn, the other caller's is not")
    loads[1].resolve("b")
    #expect(try await other.outcome == "b")
    #expect(loads[1].cancelledCount == 0)
  }

  @Test func cancellingTheAttemptWithdrawsEveryWait() async throws {
    let (loads, layers, map, load) = try await loadingMap(over: 3)
    loads[0].resolve("a")
    await eventually { layers[0].loadStatus == .loaded }
    map.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.outcome }
    await eventually { loads[1].cancelledCount == 1 && loads[2].cancelledCount == 1 }
    await eventually { layers[1].loadStatus == .notLoaded && layers[2].loadStatus == .notLoaded }
    #expect(layers[0].loadStatus == .loaded, "what already loaded stays loaded")
    #expect(layers.allSatisfy { $0.waiterCount == 0 })
  }

  @Test func aCycleThroughOneOfTheDependenciesIsReported() async throws {
    let map = AsyncLoadable { "map" }
    let layer = map.map { "layer over \($0)" }
    map.addDependency(AsyncLoadable { "basemap" })
    map.addDependency(layer)
    await #expect(throws: LoadableError.dependencyCycle) { try await map.load() }
    #expect(map.loadStatus == .failed)
  }

  /// Found in review: the group recorded an edge to every dependency before looking for answers
  /// it could give at once, as a single dependency's request does not.
  @Test func anIfNeededAttemptReadsALoadingDependencyAtOnceWithoutAnEdge() async throws {
    let slot = MapSlot()
    let loads = Counter()
    // The layer's first load returns at once; its refresh asks the map, if needed, which has the
    // layer itself as one of its two dependencies: the map can read the layer's content at once.
    let layer = AsyncLoadable<String> {
      guard loads.increment() > 1, let map = slot.map else { return "layer 1" }
      return "layer over \(try await map.fetchIfNeeded())"
    }
    _ = try await layer.fetch()
    let map = AsyncLoadable { "map" }
    map.addDependency(layer)
    map.addDependency(AsyncLoadable { "basemap" })
    slot.map = map
    #expect(try await layer.fetch() == "layer over map")
    #expect(map.loadStatus == .loaded)
  }

  /// Found in review: a map read its source's content from what the source had answered at
  /// once, though the source was refreshing, instead of asking again and joining the refresh.
  @Test func aMapLoadedIfNeededWhileItsSourceRefreshesIsMadeFromTheRefresh() async throws {
    let control = ControlledLoad<String>()
    let source = control.makeLoadable()
    let first = Task { try await source.fetch() }
    try await control.waitForStart()
    control.resolve("a")
    _ = try await first.outcome
    let refresh = Task { try await source.fetch() }
    try await control.waitForStart(2)
    let map = source.map { $0.uppercased() }
    let mapped = Task { try await map.fetchIfNeeded() }
    await eventually { source.waiterCount == 2 }  // the refresh's caller and the map's attempt
    control.resolve("b")
    #expect(try await mapped.outcome == "B")
    #expect(try await refresh.outcome == "b")
  }

  @Test func aZipOfOneLoadableTwiceLoadsItOnceAndReadsItTwice() async throws {
    let control = ControlledLoad<String>()
    let layer = control.makeLoadable()
    let both = zip(layer, layer, layer.map { $0.uppercased() })
    let load = Task { try await both.fetch() }
    try await control.waitForStart()
    // The layer's load starts as the zip registers its first wait: the zip's other wait and the
    // map's join it only after that. Resolved before the map's attempt asks, the layer's refresh
    // would be over, and the map's fetch would start another (SPEC §2: a derived loadable's
    // attempt refreshes its parent, joining a refresh that runs) that nothing here resolves.
    await eventually { layer.waiterCount == 3 }
    control.resolve("a")
    let (first, second, upper) = try await load.outcome
    #expect(first == "a" && second == "a" && upper == "A")
    #expect(control.startCount == 1)
  }

  @Test func aZipWithdrawsItsWaitsUnderEverySchedule() {
    explore { executor, generator in
      let probes = (0..<3).map { index in
        ProbeLoad(yields: Int.random(in: 0...3, using: &generator), failFirst: index == 1 && Bool.random(using: &generator))
      }
      let inputs = probes.map { probe in AsyncLoadable { try await probe.run() } }
      let zipped = zip(inputs)
      let calls = Calls(expected: 4)
      for call in 0..<2 {
        let retry = Bool.random(using: &generator)
        executor.spawn { await calls.record(call) { retry ? try await zipped.retryLoad() : try await zipped.load() } }
      }
      let direct = Int.random(in: 0...2, using: &generator)
      executor.spawn { await calls.record(2) { try await inputs[direct].load() } }
      spawnCancel(zipped, after: Int.random(in: 0...8, using: &generator), on: executor, as: 3, in: calls)
      return {
        var problems = calls.violations
        for (probe, input) in zip(probes, inputs) { problems += probe.violations(input) }
        if zipped.loadStatus == .loading { problems.append("the zip is still loading") }
        if zipped.waiterCount != 0 { problems.append("waiters left on the zip") }
        if zipped.loadStatus == .loaded, zipped.content?.count != 3 { problems.append("a partial zip") }
        return problems
      }
    }
  }

  /// A `map` whose sources can all answer at once has its attempt decided inside the call that
  /// started it (it has no task of its own): a completion handler still runs after that call
  /// returned (SPEC §1), as it would after an attempt on a task.
  @Test func aMapsRetryCompletionRunsAfterTheCallThatStartedItReturned() async throws {
    let source = AsyncLoadable(content: 2)
    let throwsOnce = Mutex(true)
    let owner = LockOwner()
    let mapped = source.map { value -> Int in
      if throwsOnce.withLock(owner: owner, { first in defer { first = false }; return first }) { throw Boom() }
      return value * 10
    }
    #expect(mapped.loadStatus == .failed)  // the transform threw when the view was made
    let returned = Mutex(false)
    let (ran, signal) = AsyncStream.makeStream(of: (returnedFirst: Bool, failed: Bool).self)
    mapped.retryLoad { error in
      signal.yield((returned.withLock(owner: owner) { $0 }, error != nil))
      signal.finish()
    }
    returned.withLock(owner: owner) { $0 = true }
    var iterator = ran.makeAsyncIterator()
    let outcome = try #require(await iterator.next())
    #expect(outcome.returnedFirst, "the completion handler ran inside retryLoad(completion:)")
    #expect(!outcome.failed)
    #expect(mapped.content == 20)
  }
}

/// Holds a loadable that a closure made before it needs it.
final class MapSlot: Sendable {
  private let stored = Mutex<AsyncLoadable<String>?>(nil)
  var map: AsyncLoadable<String>? {
    get { stored.withLock(owner: self) { $0 } }
    set { stored.withLock(owner: self) { $0 = newValue } }
  }
}

/// The group's lists keep their first element inline: the list must still behave as an array.
@Suite("InlineFirstArray", .timeLimit(.minutes(1)))
struct InlineFirstArrayTests {
  @Test func itHoldsWhatAnArrayHoldsInOrder() {
    for count in [0, 1, 2, 9] {
      var list = InlineFirstArray<Int>()
      list.reserveCapacity(count)
      for value in 0..<count { list.append(value * 10) }
      #expect(Array(list) == (0..<count).map { $0 * 10 })
      #expect(list.count == count)
      #expect(list.isEmpty == (count == 0))
      for index in list.indices { list[index] += 1 }
      #expect(Array(list) == (0..<count).map { $0 * 10 + 1 })
    }
  }

  @Test func repeatingMakesThatManyCopies() {
    #expect(Array(InlineFirstArray(repeating: 7, count: 0)).isEmpty)
    #expect(Array(InlineFirstArray(repeating: 7, count: 1)) == [7])
    var three = InlineFirstArray(repeating: 7, count: 3)
    three[2] = 9
    three[0] = 5
    #expect(Array(three) == [5, 7, 9])
    #expect(three.map { $0 * 2 } == [10, 14, 18])
  }

  /// As `Array.removeAll(where:)`: for every subset of up to four elements removed, what is left
  /// is in order, and the predicate is asked of each element once, in order (a key's version
  /// table collects what it drops in the predicate).
  @Test func removeAllKeepsTheOthersInOrder() {
    for count in 0...4 {
      for removed in 0..<(1 << count) {
        var list = InlineFirstArray(0..<count)
        var asked: [Int] = []
        list.removeAll { value in
          asked.append(value)
          return removed & (1 << value) != 0
        }
        let expected = (0..<count).filter { removed & (1 << $0) == 0 }
        #expect(Array(list) == expected, "\(count) elements, removed \(removed)")
        #expect(asked == Array(0..<count))
        list.append(99)
        #expect(Array(list) == expected + [99])
      }
    }
  }

  /// `update(_:)` sets every element, the first and the others, to the value for its index, in
  /// order, and keeps the count (a view's derivation versions are written through it).
  @Test func updateSetsEachElementByItsIndex() {
    for count in 0...4 {
      var list = InlineFirstArray(0..<count)
      var asked: [Int] = []
      list.update { index in
        asked.append(index)
        return 10 * index + 1
      }
      #expect(Array(list) == (0..<count).map { 10 * $0 + 1 }, "\(count) elements")
      #expect(asked == Array(0..<count))
    }
  }
}
