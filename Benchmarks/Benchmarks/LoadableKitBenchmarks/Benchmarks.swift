// LoadableKit benchmarks: the library, called across the module boundary as users call it,
// against the baselines a user would otherwise write (Baselines.swift), in the same run.
//
// Naming: "<group> <what> ×N" — one iteration performs N operations (calls, waiters, instances,
// nodes). Benchmarks/compare.sh divides by N and prints library ÷ baseline ratios.

import Benchmark

let benchmarks: @Sendable () -> Void = {
  registerHotPathBenchmarks()         // 1. load() / fetchIfNeeded() on a loaded loadable
  registerCoalescingBenchmarks()      // 2. N callers on one in-flight load
  registerCreationBenchmarks()        // 3. create+release, bytes per idle loadable, peak memory
  registerPipelineBenchmarks()        // 4. map chains and zip, per node
  registerContentLoaderBenchmarks()   // 5. claims and key churn
  registerContentLoaderListBenchmarks()  // 5b. limits and priorities in a list (issue 15)
  registerJobBenchmarks()             // 6. progress reports and pause points
  registerCancellationBenchmarks()    // 7. a waiter cancelling
  registerGraphBenchmarks()           // 8. a real map's graph: load and retryLoad, per node
  registerManyKeysBenchmarks()        // 9. 100,000 keys claimed and released: time and memory per key
  registerInstrumentBenchmarks()      // 10. the hot path and coalescing with and without an instrument
}
