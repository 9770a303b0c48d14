// 7. A waiter cancelling.
//
// `others` callers wait on one in-flight load; `×N` more callers (the victims) join after them,
// so each sits at the end of the waiter list. The measurement cancels the victims one at a time,
// each from `Task.cancel()` until that caller has thrown `CancellationError`. Afterwards the load
// ends and every other caller must still get its result (the others are undisturbed).

import Benchmark
import LoadableKit

let cancelVictims = 100

func registerCancellationBenchmarks() {
  for others in [100, 10_000] {
    let configuration = Benchmark.Configuration(
      metrics: [.wallClock, .mallocCountTotal],
      warmupIterations: 1,
      maxDuration: .seconds(2),
      maxIterations: 20
    )
    Benchmark("Cancel a waiter among \(others) AsyncLoadable ×\(cancelVictims)", configuration: configuration) {
      benchmark in
      try await cancelWaiters(benchmark, others: others, victims: cancelVictims)
    }
  }
}

func cancelWaiters(_ benchmark: Benchmark, others: Int, victims: Int) async throws {
  let gate = Gate()
  let loads = Counter()
  let started = Counter()
  let succeeded = Counter()
  let loadable = AsyncLoadable<Int> {
    loads.increment()
    await gate.wait()
    return 42
  }

  try await withThrowingDiscardingTaskGroup { group in
    for _ in 0..<others {
      group.addTask {
        started.increment()
        try await loadable.load()
        succeeded.increment()
      }
    }
    while started.value < others { await Task.yield() }
    try await Task.sleep(for: .milliseconds(5 + others / 1_000))

    let victimTasks = (0..<victims).map { _ in
      Task {
        started.increment()
        try await loadable.load()
      }
    }
    while started.value < others + victims { await Task.yield() }
    try await Task.sleep(for: .milliseconds(5))

    benchmark.startMeasurement()
    for task in victimTasks {
      task.cancel()
      switch await task.result {
      case .failure(is CancellationError): break
      case let other: preconditionFailure("a cancelled waiter returned \(other)")
      }
    }
    benchmark.stopMeasurement()

    precondition(succeeded.value == 0 && loadable.loadStatus == .loading, "cancelling a waiter disturbed the load")
    gate.open()
  }
  precondition(succeeded.value == others, "\(succeeded.value) of \(others) other waiters got the content")
  precondition(loads.value == 1)
}
