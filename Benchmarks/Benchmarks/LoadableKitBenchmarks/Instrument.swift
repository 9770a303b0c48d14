// 8. The instrument hook: the hot path, coalescing and an attempt's start and end, with no
// instrument installed and with one installed (issue 17).
//
// With none installed the reporting paths cost one atomic load: the "none" rows must match the
// hot path and coalescing rows of the same run within noise. The "installed" rows use a
// process-wide instrument that only counts, so they show the cost of the hook itself, not of a
// backend. compare.sh divides by the `×N` in the name.

import Benchmark
import LoadableKit
import Synchronization

/// An instrument that counts what it hears, as cheaply as an instrument can.
final class CountingInstrument: LoadInstrument {
  let starts = Atomic<Int>(0)
  let ends = Atomic<Int>(0)
  func attemptStarted(_ attempt: LoadAttempt) { starts.add(1, ordering: .relaxed) }
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) { ends.add(1, ordering: .relaxed) }
}

enum InstrumentSetting: String, CaseIterable {
  case none = "none"
  case installed = "installed"

  /// Runs `body` with the process-wide instrument set as this setting says.
  func with<R>(_ body: () async throws -> R) async rethrows -> R {
    LoadInstrumentation.processWide = self == .installed ? CountingInstrument() : nil
    defer { LoadInstrumentation.processWide = nil }
    return try await body()
  }
}

let instrumentAttempts = 1_000

func registerInstrumentBenchmarks() {
  for setting in InstrumentSetting.allCases {
    let hotPath = Benchmark.Configuration(
      metrics: [.wallClock, .mallocCountTotal], warmupIterations: 10, maxDuration: .seconds(1), maxIterations: 2_000)
    Benchmark("Instrument \(setting.rawValue): HotPath load() ×\(hotPathOps)", configuration: hotPath) { benchmark in
      try await setting.with {
        let loadable = AsyncLoadable<Int> { 42 }
        try await loadable.load()
        benchmark.startMeasurement()
        for _ in 0..<hotPathOps { try await loadable.load() }
        benchmark.stopMeasurement()
      }
    }
    Benchmark("Instrument \(setting.rawValue): HotPath fetchIfNeeded() ×\(hotPathOps)", configuration: hotPath) { benchmark in
      try await setting.with {
        let loadable = AsyncLoadable<Int> { 42 }
        try await loadable.load()
        benchmark.startMeasurement()
        for _ in 0..<hotPathOps { blackHole(try await loadable.fetchIfNeeded()) }
        benchmark.stopMeasurement()
      }
    }

    let n = 10_000
    let coalescing = Benchmark.Configuration(
      metrics: [.wallClock, .mallocCountTotal, .custom("loads", useScalingFactor: false)],
      warmupIterations: 2, maxDuration: .seconds(3), maxIterations: 25)
    Benchmark("Instrument \(setting.rawValue): Coalescing AsyncLoadable.load() ×\(n)", configuration: coalescing) {
      benchmark in
      try await setting.with { try await coalesce(benchmark, callers: n, variant: .loadableKit) }
    }

    // Where the hook reports: an attempt's start and end. Each iteration loads fresh loadables.
    let attempts = Benchmark.Configuration(
      metrics: [.wallClock, .mallocCountTotal], warmupIterations: 3, maxDuration: .seconds(2), maxIterations: 200)
    Benchmark("Instrument \(setting.rawValue): attempt start+end ×\(instrumentAttempts)", configuration: attempts) {
      benchmark in
      try await setting.with {
        let loadables = (0..<instrumentAttempts).map { index in AsyncLoadable<Int> { index } }
        benchmark.startMeasurement()
        for loadable in loadables { try await loadable.load() }
        benchmark.stopMeasurement()
      }
    }
  }
}
