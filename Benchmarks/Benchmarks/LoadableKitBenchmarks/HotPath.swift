// 1. The hot path: asking a loadable that has already loaded.
//
// Every iteration performs `hotPathOps` calls; compare.sh divides by the `×N` in the name.

import Benchmark
import LoadableKit

let hotPathOps = 10_000

func registerHotPathBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 10,
    maxDuration: .seconds(1),
    maxIterations: 2_000
  )
  let n = hotPathOps

  // MARK: Baselines

  Benchmark("HotPath Mutex.withLock floor ×\(n)", configuration: configuration) { benchmark in
    let box = MutexBox(42)
    benchmark.startMeasurement()
    for _ in 0..<n { blackHole(box.value()) }
  }

  Benchmark("HotPath ActorMemoizer.value nonisolated ×\(n)", configuration: configuration) { benchmark in
    let memoizer = ActorMemoizer<Int> { 42 }
    _ = try await memoizer.value()
    benchmark.startMeasurement()
    for _ in 0..<n { blackHole(try await memoizer.value()) }
  }

  // MARK: LoadableKit, nonisolated caller

  Benchmark("HotPath load() nonisolated ×\(n)", configuration: configuration) { benchmark in
    let loadable = AsyncLoadable<Int> { 42 }
    try await loadable.load()
    benchmark.startMeasurement()
    for _ in 0..<n { try await loadable.load() }
  }

  Benchmark("HotPath fetchIfNeeded() nonisolated ×\(n)", configuration: configuration) { benchmark in
    let loadable = AsyncLoadable<Int> { 42 }
    try await loadable.load()
    benchmark.startMeasurement()
    for _ in 0..<n { blackHole(try await loadable.fetchIfNeeded()) }
  }

  // MARK: LoadableKit, @MainActor caller
  //
  // The measurement starts and stops on the main actor, so the one hop onto it is not counted;
  // what is left is the cost of each call made from there. A call that hopped off the main
  // actor would cost 10–25 µs (compare the actor memoizer row).

  Benchmark("HotPath load() MainActor ×\(n)", configuration: configuration) { benchmark in
    let loadable = AsyncLoadable<Int> { 42 }
    try await loadable.load()
    try await mainActorLoads(Unchecked(benchmark), loadable)
  }

  Benchmark("HotPath fetchIfNeeded() MainActor ×\(n)", configuration: configuration) { benchmark in
    let loadable = AsyncLoadable<Int> { 42 }
    try await loadable.load()
    try await mainActorFetches(Unchecked(benchmark), loadable)
  }

  Benchmark("HotPath ActorMemoizer.value MainActor ×\(n / 10)", configuration: configuration) { benchmark in
    let memoizer = ActorMemoizer<Int> { 42 }
    _ = try await memoizer.value()
    try await onMainActor(Unchecked(benchmark), count: n / 10) { blackHole(try await memoizer.value()) }
  }
}

/// `load()` `hotPathOps` times on the main actor, measuring only the loop.
@MainActor
func mainActorLoads(_ benchmark: Unchecked<Benchmark>, _ loadable: AsyncLoadable<Int>) async throws {
  benchmark.value.startMeasurement()
  for _ in 0..<hotPathOps { try await loadable.load() }
  benchmark.value.stopMeasurement()
}

/// `fetchIfNeeded()` `hotPathOps` times on the main actor, measuring only the loop.
@MainActor
func mainActorFetches(_ benchmark: Unchecked<Benchmark>, _ loadable: AsyncLoadable<Int>) async throws {
  benchmark.value.startMeasurement()
  for _ in 0..<hotPathOps { blackHole(try await loadable.fetchIfNeeded()) }
  benchmark.value.stopMeasurement()
}

/// Runs `body` `count` times on the main actor, measuring only the loop.
@MainActor
func onMainActor(
  _ benchmark: Unchecked<Benchmark>, count: Int = hotPathOps,
  _ body: @MainActor () async throws -> Void
) async throws {
  benchmark.value.startMeasurement()
  for _ in 0..<count { try await body() }
  benchmark.value.stopMeasurement()
}

/// Carries a non-`Sendable` value to another isolation domain where it is used sequentially.
struct Unchecked<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}
