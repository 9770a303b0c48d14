// 7. A waiter cancelling.
//
// `others` callers wait on one in-flight load (or, for the floor, on bare cancellable
// continuations: `CancellableWaiters`); `×N` more callers (the victims) join after them,
// so each sits at the end of the waiter list. The measurement cancels the victims one at a time,
// each from `Task.cancel()` until that caller has thrown `CancellationError`. Afterwards the load
// ends and every other caller must still get its result (the others are undisturbed).

import Benchmark
import LoadableKit

let cancelVictims = 100

enum CancelVariant: String, CaseIterable {
  case loadableKit = "AsyncLoadable"
  case floor = "bare continuation floor"
}

func registerCancellationBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 1,
    maxDuration: .seconds(2),
    maxIterations: 20
  )
  for others in [100, 10_000] {
    for variant in CancelVariant.allCases {
      Benchmark("Cancel a waiter among \(others) \(variant.rawValue) ×\(cancelVictims)", configuration: configuration) {
        benchmark in
        try await cancelWaiters(benchmark, others: others, victims: cancelVictims, variant: variant)
      }
    }
  }
}

func cancelWaiters(_ benchmark: Benchmark, others: Int, victims: Int, variant: CancelVariant) async throws {
  let gate = Gate()
  let loads = Counter()
  let started = Counter()
  let succeeded = Counter()
  let call: @Sendable () async throws -> Void
  let finish: @Sendable () -> Void
  let stillWaiting: @Sendable () -> Bool
  switch variant {
  case .loadableKit:
    let loadable = AsyncLoadable<Int> {
      loads.increment()
      await gate.wait()
      return 42
    }
    call = { try await loadable.load() }
    finish = { gate.open() }
    stillWaiting = { loadable.loadStatus == .loading }
  case .floor:
    let waiters = CancellableWaiters()
    loads.increment()
    call = { try await waiters.wait() }
    finish = { waiters.open() }
    stillWaiting = { true }
  }

  try await withThrowingDiscardingTaskGroup { group in
    for _ in 0..<others {
      group.addTask {
        started.increment()
        try await call()
        succeeded.increment()
      }
    }
    while started.value < others { await Task.yield() }
    try await Task.sleep(for: .milliseconds(5 + others / 1_000))

    let victimTasks = (0..<victims).map { _ in
      Task {
        started.increment()
        try await call()
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

    precondition(succeeded.value == 0 && stillWaiting(), "cancelling a waiter disturbed the load")
    finish()
  }
  precondition(succeeded.value == others, "\(succeeded.value) of \(others) other waiters got the content")
  precondition(loads.value == 1)
}
