// 3. Creation and memory.
//
// Every loadable is made with an async closure that captures a key, as real code does
// (`AsyncLoadable<User> { try await api.user(id) }`), so the closure context is counted too.
// (A closure that does not `await` picks LoadableKit's synchronous-closure initializer, which
// wraps it in one more 40-byte thunk context.)

import Benchmark
import LoadableKit

let creationOps = 1_000
let peakMemoryCount = 1_000_000

func registerCreationBenchmarks() {
  let timed = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal, .mallocBytesCount],
    warmupIterations: 10,
    maxDuration: .seconds(1),
    maxIterations: 1_000
  )
  let n = creationOps

  Benchmark("Create+release AsyncLoadable<Int> ×\(n)", configuration: timed) { benchmark in
    for key in 0..<n { blackHole(AsyncLoadable<Int> { try await fetchValue(key) }) }
  }

  Benchmark("Create+release ActorMemoizer<Int> ×\(n)", configuration: timed) { benchmark in
    for key in 0..<n { blackHole(ActorMemoizer<Int> { try await fetchValue(key) }) }
  }

  // Bytes and allocations of idle instances that stay alive (released after the measurement).
  Benchmark("Idle AsyncLoadable<Int> ×\(n)", configuration: timed) { benchmark in
    var kept: [AsyncLoadable<Int>] = []
    kept.reserveCapacity(n)
    benchmark.startMeasurement()
    for key in 0..<n { kept.append(AsyncLoadable<Int> { try await fetchValue(key) }) }
    benchmark.stopMeasurement()
    blackHole(kept)
  }

  Benchmark("Idle ActorMemoizer<Int> ×\(n)", configuration: timed) { benchmark in
    var kept: [ActorMemoizer<Int>] = []
    kept.reserveCapacity(n)
    benchmark.startMeasurement()
    for key in 0..<n { kept.append(ActorMemoizer<Int> { try await fetchValue(key) }) }
    benchmark.stopMeasurement()
    blackHole(kept)
  }

  // Peak resident memory, sampled by the OS every ~10 ms: one iteration in a fresh process.
  let peak = Benchmark.Configuration(
    metrics: [.peakMemoryResidentDelta, .mallocBytesCount, .mallocCountTotal, .wallClock],
    warmupIterations: 0,
    maxDuration: .seconds(30),
    maxIterations: 1
  )
  let m = peakMemoryCount

  Benchmark("Peak memory AsyncLoadable<Int> ×\(m)", configuration: peak) { benchmark in
    var kept: [AsyncLoadable<Int>] = []
    kept.reserveCapacity(m)
    for key in 0..<m { kept.append(AsyncLoadable<Int> { try await fetchValue(key) }) }
    try await Task.sleep(for: .milliseconds(50))
    blackHole(kept)
  }

  Benchmark("Peak memory ActorMemoizer<Int> ×\(m)", configuration: peak) { benchmark in
    var kept: [ActorMemoizer<Int>] = []
    kept.reserveCapacity(m)
    for key in 0..<m { kept.append(ActorMemoizer<Int> { try await fetchValue(key) }) }
    try await Task.sleep(for: .milliseconds(50))
    blackHole(kept)
  }
}
