// 2. Coalescing: N concurrent callers on one in-flight load.
//
// Each iteration starts N caller tasks, waits until they are all parked on the load, then measures
// from the moment the load ends (the gate opens) until every caller has returned. compare.sh
// divides by the `×N` in the name to get the cost per waiter. The count of underlying loads is
// checked (it must be 1) and reported as the custom metric `loads`.

import Benchmark
import LoadableKit
import Synchronization

enum CoalescingVariant: String, CaseIterable {
  case loadableKit = "AsyncLoadable.load()"
  case actorMemoizer = "ActorMemoizer.value"
  case sharedTask = "shared Task.value"
  case rawContinuations = "raw continuations floor"
}

let coalescingSizes = [1_000, 10_000, 40_000]

func registerCoalescingBenchmarks() {
  for n in coalescingSizes {
    for variant in CoalescingVariant.allCases {
      let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .custom("loads", useScalingFactor: false)],
        warmupIterations: 2,
        maxDuration: .seconds(3),
        maxIterations: n >= 40_000 ? 10 : n >= 10_000 ? 25 : 60
      )
      Benchmark("Coalescing \(variant.rawValue) ×\(n)", configuration: configuration) { benchmark in
        try await coalesce(benchmark, callers: n, variant: variant)
      }
    }
  }
}

func coalesce(_ benchmark: Benchmark, callers n: Int, variant: CoalescingVariant) async throws {
  let gate = Gate()
  let loads = Counter()
  let started = Counter()
  let returned = Counter()

  let call: @Sendable () async throws -> Void
  switch variant {
  case .loadableKit:
    let loadable = AsyncLoadable<Int> {
      loads.increment()
      await gate.wait()
      return 42
    }
    call = { try await loadable.load() }
  case .actorMemoizer:
    let memoizer = ActorMemoizer<Int> {
      loads.increment()
      await gate.wait()
      return 42
    }
    call = { blackHole(try await memoizer.value()) }
  case .sharedTask:
    let task = Task<Int, any Error> {
      loads.increment()
      await gate.wait()
      return 42
    }
    call = { blackHole(try await task.value) }
  case .rawContinuations:
    loads.increment()  // the "load" is the gate itself
    call = { await gate.wait() }
  }

  try await withThrowingDiscardingTaskGroup { group in
    for _ in 0..<n {
      group.addTask {
        started.increment()
        try await call()
        returned.increment()
      }
    }
    // Every caller has started; give the last ones time to park (the actor memoizer registers
    // its callers one at a time, so allow ~1 µs each).
    while started.value < n { await Task.yield() }
    try await Task.sleep(for: .milliseconds(5 + n / 1_000))
    precondition(returned.value == 0, "a caller returned before the load ended")

    benchmark.startMeasurement()
    gate.open()
  }
  benchmark.stopMeasurement()

  precondition(returned.value == n, "\(returned.value) of \(n) callers returned")
  precondition(loads.value == 1, "\(loads.value) underlying loads for one coalesced request")
  benchmark.measurement(.custom("loads", useScalingFactor: false), loads.value)
}
