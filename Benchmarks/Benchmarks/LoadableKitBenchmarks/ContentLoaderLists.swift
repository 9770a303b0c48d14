// 5b. ContentLoader for real lists (issue 15).
//
// - churn with a limit: keys 0..<5,000 claimed in order, 20 visible at a time, each load taking
//   a few yields; with `maximumConcurrentLoads: 6` against the same without a limit, per key;
// - a fling of 200 rows, 6 visible at a time, with a limit of 6 and visible/prefetch priorities
//   against no limit: the loads that called the data source are counted (printed once), the
//   time per row measured.

import Benchmark
import LoadableKit
import Synchronization

let listKeys = 5_000
let flingRows = 200

/// Counts the loads that reached the data source.
final class LoadCount: Sendable {
  let value = Atomic<Int>(0)
}

func registerContentLoaderListBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 2,
    maxDuration: .seconds(2),
    maxIterations: 50
  )

  for limit in [nil, 6] as [Int?] {
    // No commas in a benchmark's name: the CSV export that compare.sh reads splits on them.
    let name = limit.map { "limit \($0)" } ?? "no limit"
    Benchmark("ContentLoader list churn \(name) ×\(listKeys)", configuration: configuration) { benchmark in
      let loader = ContentLoader<Int, Int, Int>(
        maximumIdleCount: 100, maximumConcurrentLoads: limit,
        load: { key in
          for _ in 0..<3 { await Task.yield() }
          return (key, 1)
        })
      scroll(loader, past: listKeys, benchmark)
    }
  }

  for limit in [nil, 6] as [Int?] {
    let name = limit.map { "limit \($0) prefetch" } ?? "no limit"
    let printed = Atomic<Bool>(false)
    Benchmark("ContentLoader fling \(name) ×\(flingRows)", configuration: configuration) { benchmark in
      let started = LoadCount()
      let loader = ContentLoader<Int, Int, Int>(
        maximumIdleCount: 12, maximumConcurrentLoads: limit,
        load: { key in
          started.value.wrappingAdd(1, ordering: .relaxed)
          for _ in 0..<10 { await Task.yield() }
          return (key, 1)
        })
      var visible: [ContentLoader<Int, Int, Int>.Claim] = []
      benchmark.startMeasurement()
      for row in 0..<flingRows {
        if visible.count == 6 { visible.removeFirst().end() }
        visible.append(loader.begin(row))
        if limit != nil { visible.append(loader.begin(row + 1, priority: .prefetch)) }
        if limit != nil, visible.count > 6 { visible.removeFirst().end() }
        await Task.yield()
      }
      for claim in visible { claim.end() }
      benchmark.stopMeasurement()
      if !printed.exchange(true, ordering: .relaxed) {
        print("ContentLoader fling \(name): \(started.value.load(ordering: .relaxed)) loads reached the data source")
      }
    }
  }
}
