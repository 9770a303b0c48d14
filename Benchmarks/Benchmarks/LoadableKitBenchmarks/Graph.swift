// 8. A graph the size of a real map, against the same graph written by hand.
//
// One map over 50 layers; each layer over its feature table and its portal item, every item
// coming from ONE shared portal. Built as an app would build it:
//
//   portal            AsyncLoadable { portal info }                 (shared by all 50 items)
//   item i            portal.flatMap { AsyncLoadable { item i } }   (an item chosen by the portal)
//   table i           AsyncLoadable { table i }, addDependency(item i)
//   layer i           zip(table i, item i).map { … }
//   map               AsyncLoadable { web map }, addDependency(layer i) for every layer
//
// That is 1 + 50 × 3 + 1 = 152 nodes the app declares (the combinators' own inner loadables are
// not counted). Each iteration builds a fresh, unloaded graph (not measured), then measures:
// - "load": one `load()` of the map, which loads everything;
// - "retryLoad": the portal fails its first call, so the first `load()` fails everywhere except
//   so every item, table and layer and the map fail with it (not measured); then one
//   `retryLoad()` of the map, which retries them all (the loaded nodes are not reloaded).
// The baseline is the same graph as plain async functions, each node behind a hand-written memo
// (`Memo`: a `Mutex`-protected in-flight `Task` or value, failures not kept, so calling again
// retries), layers loaded concurrently by a task group as `zip` and dependencies do.
// Every variant also runs from the `@MainActor`, where an app calls it.

import Benchmark
import LoadableKit
import Synchronization

let graphLayers = 50
let graphNodes = 1 + graphLayers * 3 + 1

/// Stands in for the portal service: fails its first call when asked to.
final class FlakyPortal: Sendable {
  private let failuresLeft: Atomic<Int>
  init(failures: Int) { failuresLeft = Atomic(failures) }

  struct Unreachable: Error {}

  func info() async throws -> Int {
    if failuresLeft.load(ordering: .relaxed) > 0, failuresLeft.subtract(1, ordering: .relaxed).newValue >= 0 {
      throw Unreachable()
    }
    return try await fetchValue(1_000)
  }
}

/// The app's graph, built with LoadableKit's combinators and dependencies.
struct LoadableGraph: Sendable {
  let map: AsyncLoadable<Int>

  init(portalFailures: Int) {
    let service = FlakyPortal(failures: portalFailures)
    let portal = AsyncLoadable<Int> { try await service.info() }
    let map = AsyncLoadable<Int> { try await fetchValue(-1) }
    for index in 0..<graphLayers {
      let item = portal.flatMap { info in AsyncLoadable<Int> { try await fetchValue(info + index) } }
      let table = AsyncLoadable<Int> { try await fetchValue(index) }
      table.addDependency(item)
      let layer = zip(table, item).map { table, item in table + item }
      map.addDependency(layer)
    }
    self.map = map
  }
}

/// A hand-written memo: one in-flight `Task` shared by concurrent callers, then the value.
/// A failure is not kept, so the next call runs the operation again (the hand-written retry).
final class Memo<Value: Sendable>: Sendable {
  private enum State {
    case idle
    case running(Task<Value, any Error>)
    case done(Value)
  }

  private let state = Mutex(State.idle)

  private enum Next {
    case value(Value)
    case wait(Task<Value, any Error>)
  }

  func value(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
    let next = state.withLock { state -> Next in
      switch state {
      case .done(let value): return .value(value)
      case .running(let task): return .wait(task)
      case .idle:
        let task = Task { try await operation() }
        state = .running(task)
        return .wait(task)
      }
    }
    switch next {
    case .value(let value): return value
    case .wait(let task):
      do {
        let value = try await task.value
        state.withLock { $0 = .done(value) }
        return value
      } catch {
        state.withLock { state in
          if case .running = state { state = .idle }
        }
        throw error
      }
    }
  }
}

/// The same graph as plain async functions with a memo per node.
final class HandWrittenGraph: Sendable {
  private let service: FlakyPortal
  private let portalMemo = Memo<Int>()
  private let itemMemos = (0..<graphLayers).map { _ in Memo<Int>() }
  private let tableMemos = (0..<graphLayers).map { _ in Memo<Int>() }
  private let layerMemos = (0..<graphLayers).map { _ in Memo<Int>() }
  private let mapMemo = Memo<Int>()

  init(portalFailures: Int) { service = FlakyPortal(failures: portalFailures) }

  func portal() async throws -> Int {
    try await portalMemo.value { [service] in try await service.info() }
  }

  func item(_ index: Int) async throws -> Int {
    try await itemMemos[index].value { [self] in try await fetchValue(try await portal() + index) }
  }

  func table(_ index: Int) async throws -> Int {
    try await tableMemos[index].value { [self] in
      _ = try await item(index)
      return try await fetchValue(index)
    }
  }

  func layer(_ index: Int) async throws -> Int {
    try await layerMemos[index].value { [self] in
      async let table = table(index)
      async let item = item(index)
      return try await table + item
    }
  }

  func map() async throws -> Int {
    try await mapMemo.value { [self] in
      try await withThrowingDiscardingTaskGroup { group in
        for index in 0..<graphLayers { group.addTask { _ = try await self.layer(index) } }
      }
      return try await fetchValue(-1)
    }
  }
}

enum GraphVariant: String, CaseIterable {
  case loadableKit = "LoadableKit"
  case baseline = "hand-written memos"
}

enum GraphCall: String, CaseIterable {
  case load = "load"
  case retry = "retryLoad"
}

func registerGraphBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 3,
    maxDuration: .seconds(2),
    maxIterations: 200
  )
  for call in GraphCall.allCases {
    for variant in GraphVariant.allCases {
      Benchmark("Graph \(call.rawValue) \(variant.rawValue) ×\(graphNodes)", configuration: configuration) { benchmark in
        let run = try await prepareGraph(call, variant)
        benchmark.startMeasurement()
        let value = try await run()
        benchmark.stopMeasurement()
        precondition(value == -1, "the map loaded \(value)")
      }
      Benchmark("Graph \(call.rawValue) MainActor \(variant.rawValue) ×\(graphNodes)", configuration: configuration) {
        benchmark in
        let run = try await prepareGraph(call, variant)
        let value = try await measuredOnMainActor(Unchecked(benchmark), run)
        precondition(value == -1, "the map loaded \(value)")
      }
    }
  }
}

/// Builds a fresh graph (and, for a retry, fails its first load) and returns the measured call.
func prepareGraph(_ call: GraphCall, _ variant: GraphVariant) async throws -> nonisolated(nonsending) @Sendable () async throws -> Int {
  let failures = call == .retry ? 1 : 0
  switch variant {
  case .loadableKit:
    let graph = LoadableGraph(portalFailures: failures)
    if call == .retry {
      do {
        try await graph.map.load()
        preconditionFailure("the portal did not fail")
      } catch is FlakyPortal.Unreachable {}
      precondition(graph.map.loadStatus == .failed)
      return {
        try await graph.map.retryLoad()
        return graph.map.content ?? 0
      }
    }
    return {
      try await graph.map.load()
      return graph.map.content ?? 0
    }
  case .baseline:
    let graph = HandWrittenGraph(portalFailures: failures)
    if call == .retry {
      do {
        _ = try await graph.map()
        preconditionFailure("the portal did not fail")
      } catch is FlakyPortal.Unreachable {}
    }
    return { try await graph.map() }
  }
}

/// Runs `body` once on the main actor, measuring only the call. `body` is
/// `nonisolated(nonsending)`, so it runs on the main actor too: what LoadableKit's API does there
/// is measured, not a hop the benchmark added. (A plain `async` function that `body` calls, as the
/// hand-written baseline's are, still leaves the main actor, as it would in an app.)
@MainActor
func measuredOnMainActor<T: Sendable>(
  _ benchmark: Unchecked<Benchmark>, _ body: nonisolated(nonsending) @Sendable () async throws -> T
) async throws -> T {
  benchmark.value.startMeasurement()
  let value = try await body()
  benchmark.value.stopMeasurement()
  return value
}
