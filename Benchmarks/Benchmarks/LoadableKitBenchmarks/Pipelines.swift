// 4. Pipelines: loading a `map` chain and a `zip`, per node; a caller's `flatMap`, per load.
//
// Each iteration builds a fresh, unloaded pipeline (not measured), then measures one `load()` of
// its end, which loads every node. The three sizes of each shape show whether the cost is linear
// (10× the nodes should cost at most 11× the time, at 100 → 1,000 → 10,000, as the SPEC asks).
// The baselines are what one would write by hand: for the chain, as many tasks each awaiting the one before; for `zip`, a task group
// running as many closures. Their own growth shows what the runtime and the machine add.

import Benchmark
import LoadableKit

func registerPipelineBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 2,
    maxDuration: .seconds(2),
    maxIterations: 40
  )

  for depth in [100, 1_000, 10_000] {
    Benchmark("Pipeline map chain load ×\(depth)", configuration: configuration) { benchmark in
      let root = AsyncLoadable<Int> { 0 }
      var end = root
      for _ in 0..<depth { end = end.map { $0 + 1 } }
      benchmark.startMeasurement()
      try await end.load()
      benchmark.stopMeasurement()
      precondition(end.content == depth, "the chain computed \(String(describing: end.content))")
    }
  }

  // The map chain's baseline: as many tasks, each awaiting the one before and adding one.
  for depth in [100, 1_000, 10_000] {
    Benchmark("Pipeline task chain baseline ×\(depth)", configuration: configuration) { benchmark in
      benchmark.startMeasurement()
      var end = Task<Int, any Error> { 0 }
      for _ in 0..<depth {
        let previous = end
        end = Task { try await previous.value + 1 }
      }
      let value = try await end.value
      benchmark.stopMeasurement()
      precondition(value == depth)
    }
  }

  for width in [100, 1_000, 10_000] {
    Benchmark("Pipeline zip load ×\(width)", configuration: configuration) { benchmark in
      let inputs = (0..<width).map { index in AsyncLoadable<Int> { index } }
      let zipped = zip(inputs)
      benchmark.startMeasurement()
      try await zipped.load()
      benchmark.stopMeasurement()
      precondition(zipped.content?.count == width)
    }

    Benchmark("Pipeline task group baseline ×\(width)", configuration: configuration) { benchmark in
      let inputs: [@Sendable () async throws -> Int] = (0..<width).map { index in { index } }
      benchmark.startMeasurement()
      let values = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
        for (index, input) in inputs.enumerated() {
          group.addTask { (index, try await input()) }
        }
        var values = [Int](repeating: 0, count: width)
        for try await (index, value) in group { values[index] = value }
        return values
      }
      benchmark.stopMeasurement()
      precondition(values.count == width)
    }
  }

  // A caller's `flatMap` (an app's `item.flatMap { … }.load()`): 100 fresh ones, each over a fresh
  // source, loaded one after the other; the inner loadable is made by the transform. The baseline
  // is what one would write by hand: a task for the source's value, then one for the inner value.
  let flatMaps = 100
  Benchmark("Pipeline flatMap load by a caller ×\(flatMaps)", configuration: configuration) { benchmark in
    let views = (0..<flatMaps).map { index in
      AsyncLoadable<Int> { index }.flatMap { value in AsyncLoadable<Int> { value + 1 } }
    }
    benchmark.startMeasurement()
    for view in views { try await view.load() }
    benchmark.stopMeasurement()
    precondition(views.last?.content == flatMaps)
  }
  Benchmark("Pipeline flatMap baseline two tasks ×\(flatMaps)", configuration: configuration) { benchmark in
    benchmark.startMeasurement()
    var last = 0
    for index in 0..<flatMaps {
      let value = try await Task<Int, any Error> { index }.value
      last = try await Task<Int, any Error> { value + 1 }.value
    }
    benchmark.stopMeasurement()
    precondition(last == flatMaps)
  }
}
