// 6. Jobs: the two calls a job's work makes for every item — `reportProgress` and
// `pausePoint()` — measured inside a running job, 10,000 per iteration.
//
// Baselines: a `Mutex`-protected progress value raised by each report (what one would write by
// hand), and `Task.checkCancellation()`, the least a cooperative stopping point can cost.

import Benchmark
import LoadableKit
import Synchronization

let jobOps = 10_000

/// The work under measurement. The benchmark object cannot be a property of a `Codable` work
/// value, so the work reaches it through `JobMeasurement`, set by the benchmark around the job.
struct MeasuredWork: JobWork {
  enum Mode: String, Codable {
    case reportProgress, pausePoint
  }

  typealias Output = Int
  typealias Checkpoint = Int
  static let kind = "org.loadablekit.benchmarks.measured"

  var mode: Mode
  var count: Int

  func run(in context: JobContext<Int>) async throws -> Int {
    JobMeasurement.start()
    switch mode {
    case .reportProgress:
      for item in 0..<count { context.reportProgress(completed: item + 1, total: count) }
    case .pausePoint:
      for _ in 0..<count { try await context.pausePoint() }
    }
    JobMeasurement.stop()
    return count
  }
}

/// Where a running `MeasuredWork` finds the benchmark to start and stop (one job at a time).
enum JobMeasurement {
  nonisolated(unsafe) static var benchmark: Benchmark?
  static func start() { benchmark?.startMeasurement() }
  static func stop() { benchmark?.stopMeasurement() }
}

func registerJobBenchmarks() {
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 10,
    maxDuration: .seconds(1),
    maxIterations: 1_000
  )
  let n = jobOps

  for mode in [MeasuredWork.Mode.reportProgress, .pausePoint] {
    Benchmark("Jobs \(mode.rawValue) ×\(n)", configuration: configuration) { benchmark in
      JobMeasurement.benchmark = benchmark
      defer { JobMeasurement.benchmark = nil }
      let job = Job(MeasuredWork(mode: mode, count: n))
      job.start()
      let output = try await job.output
      precondition(output == n)
    }
  }

  Benchmark("Jobs baseline Mutex progress ×\(n)", configuration: configuration) { benchmark in
    let progress = Mutex(0.0)
    benchmark.startMeasurement()
    for item in 0..<n {
      let fraction = Double(item + 1) / Double(n)
      progress.withLock { $0 = max($0, fraction) }
    }
    benchmark.stopMeasurement()
    blackHole(progress.withLock { $0 })
  }

  Benchmark("Jobs baseline Task.checkCancellation ×\(n)", configuration: configuration) { benchmark in
    benchmark.startMeasurement()
    for _ in 0..<n { try Task.checkCancellation() }
    benchmark.stopMeasurement()
  }
}
