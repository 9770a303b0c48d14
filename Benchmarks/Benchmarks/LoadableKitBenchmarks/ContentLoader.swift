// 5. ContentLoader: claims and scroll churn.
//
// - claim begin+end on a key that is loaded and held by another claim, 1,000 per iteration,
//   against a hand-written claim count (a `Mutex`-protected dictionary of counts);
// - scroll churn: keys 0..<N are claimed in order, 20 visible at a time (the claim of key k ends
//   when key k+20 is claimed), as a list scrolling past N rows; every claim starts a load that the
//   end of the claim cancels (or that finishes first). Per key, at 100, 500, 1,000, 5,000 and
//   10,000 keys (the SPEC's growth rule is 100 → 1,000 → 10,000; 500 and 5,000 are the older rows),
//   against the same scroll over a `Mutex`-protected dictionary of tasks (`TaskTable`).

import Benchmark
import LoadableKit
import Synchronization

let claimOps = 1_000
let visibleRows = 20

func registerContentLoaderBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 5,
    maxDuration: .seconds(2),
    maxIterations: 200
  )

  Benchmark("ContentLoader claim begin+end ×\(claimOps)", configuration: configuration) { benchmark in
    let loader = ContentLoader<Int, Int, Int>(load: { key in (key, 1) })
    let holder = loader.begin(0)
    while holder.snapshot.status != .loaded { await Task.yield() }
    benchmark.startMeasurement()
    for _ in 0..<claimOps { loader.begin(0).end() }
    benchmark.stopMeasurement()
    holder.end()
  }

  Benchmark("ContentLoader baseline Mutex claim count ×\(claimOps)", configuration: configuration) { benchmark in
    let counts = Mutex<[Int: Int]>([0: 1])
    benchmark.startMeasurement()
    for _ in 0..<claimOps {
      counts.withLock { $0[0, default: 0] += 1 }
      counts.withLock { $0[0, default: 0] -= 1 }
    }
    benchmark.stopMeasurement()
  }

  for keys in [100, 500, 1_000, 5_000, 10_000] {
    Benchmark("ContentLoader churn ×\(keys)", configuration: configuration) { benchmark in
      try await scrollChurn(keys: keys, benchmark)
    }
  }

  // The baseline (SPEC: key churn ≤ 3× a `Mutex`-protected dictionary of tasks): the same scroll
  // over `TaskTable` (ContentLoaderKeys.swift), each key's task the same 1 ms load at the
  // priority of a visible claim's load, cancelled by the end of its last claim.
  for keys in [100, 1_000, 10_000] {
    Benchmark("ContentLoader churn baseline Mutex dictionary of tasks ×\(keys)", configuration: configuration) {
      benchmark in
      let table = TaskTable(priority: .userInitiated) { key in
        try await Task.sleep(for: .milliseconds(1))
        return key
      }
      var visible: [Int] = []
      visible.reserveCapacity(visibleRows)
      benchmark.startMeasurement()
      for key in 0..<keys {
        if visible.count == visibleRows { table.end(visible.removeFirst()) }
        table.begin(key)
        visible.append(key)
      }
      for key in visible { table.end(key) }
      benchmark.stopMeasurement()
      try await Task.sleep(for: .milliseconds(20))  // let the cancelled loads wind down
      precondition(table.count == 0)
    }
  }

  // The same churn claimed from a task at the priority of a visible claim's load
  // (`.userInitiated`), as a list on the main actor claims. Above, the loop runs at the default
  // priority and the loads it starts at `.userInitiated`, so threads of two priorities share the
  // cores (README: "Key churn and the loads' priority").
  for keys in [100, 1_000, 10_000] {
    Benchmark("ContentLoader churn at the loads' priority ×\(keys)", configuration: configuration) { benchmark in
      nonisolated(unsafe) let benchmark = benchmark
      try await Task(priority: .userInitiated) { try await scrollChurn(keys: keys, benchmark) }.value
    }
  }
}

/// Scroll churn: `keys` keys, each load still running (1 ms) when most claims end.
func scrollChurn(keys: Int, _ benchmark: Benchmark) async throws {
  let loader = ContentLoader<Int, Int, Int>(maximumIdleCount: 100, load: { key in
    try await Task.sleep(for: .milliseconds(1))
    return (key, 1)
  })
  scroll(loader, past: keys, benchmark)
  try await Task.sleep(for: .milliseconds(20))  // let the cancelled loads wind down
}

/// Claims the keys `0..<keys` of `loader` in order, `visibleRows` at a time (the claim of key k
/// ends when key k + `visibleRows` is claimed), as a list scrolling past them; measures the loop.
func scroll(_ loader: ContentLoader<Int, Int, Int>, past keys: Int, _ benchmark: Benchmark) {
  var visible: [ContentLoader<Int, Int, Int>.Claim] = []
  visible.reserveCapacity(visibleRows)
  benchmark.startMeasurement()
  for key in 0..<keys {
    if visible.count == visibleRows { visible.removeFirst().end() }
    visible.append(loader.begin(key))
  }
  for claim in visible { claim.end() }
  benchmark.stopMeasurement()
}
