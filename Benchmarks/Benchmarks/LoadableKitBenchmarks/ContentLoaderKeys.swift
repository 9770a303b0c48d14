// 9. Many keys: 100,000 keys claimed, loaded and released in a `ContentLoader`.
//
// A list of 100,000 rows that all become visible, load, and go away: each key is claimed
// (`begin`), its load runs (a closure that returns at once), and once every key is loaded every
// claim ends. The baseline is what one would write by hand: a `Mutex`-protected dictionary from
// key to a claim count and the key's `Task`, the first claim starting the task and the last one
// removing and cancelling it.
//
// - time per key: claim + load + release, measured from the first `begin` until the last `end`,
//   from a nonisolated task and from the `@MainActor` (where a list's cells claim their rows);
// - peak resident memory per key: all 100,000 keys claimed and loaded at once, one iteration in
//   a fresh process (the array of claims or keys, 8 bytes a key, included on both sides).

import Benchmark
import LoadableKit
import Synchronization

let manyKeys = 100_000

/// The hand-written keyed loader: a claim count and a `Task` per key, behind one `Mutex`.
final class TaskTable: Sendable {
  private struct Entry {
    var claims: Int
    let task: Task<Int, any Error>
  }

  private let entries = Mutex<[Int: Entry]>([:])
  private let priority: TaskPriority?
  private let load: @Sendable (Int) async throws -> Int

  /// A table whose keys' tasks run `load` at `priority` (`nil`: the claiming task's).
  init(priority: TaskPriority? = nil, load: @escaping @Sendable (Int) async throws -> Int = fetchValue) {
    self.priority = priority
    self.load = load
  }

  /// Claims `key`; the first claim starts its load.
  func begin(_ key: Int) {
    entries.withLock { entries in
      if entries[key] != nil {
        entries[key]!.claims += 1
      } else {
        entries[key] = Entry(claims: 1, task: Task(priority: priority) { [load] in try await load(key) })
      }
    }
  }

  /// The value of `key`'s load (the key must be claimed).
  func value(_ key: Int) async throws -> Int {
    let task = entries.withLock { $0[key]?.task }
    return try await task!.value
  }

  /// Ends one claim on `key`; the last one removes the entry and cancels its load.
  func end(_ key: Int) {
    let removed = entries.withLock { entries -> Entry? in
      guard var entry = entries[key] else { return nil }
      entry.claims -= 1
      if entry.claims > 0 {
        entries[key] = entry
        return nil
      }
      return entries.removeValue(forKey: key)
    }
    removed?.task.cancel()
  }

  var count: Int { entries.withLock { $0.count } }
}

enum KeysVariant: String, CaseIterable {
  case loadableKit = "ContentLoader"
  case baseline = "Mutex dictionary of tasks"
}

func registerManyKeysBenchmarks() {
  let timed = Benchmark.Configuration(
    metrics: [.wallClock, .mallocCountTotal],
    warmupIterations: 1,
    maxDuration: .seconds(5),
    maxIterations: 10
  )
  for variant in KeysVariant.allCases {
    Benchmark("Keys claim+load+release \(variant.rawValue) ×\(manyKeys)", configuration: timed) { benchmark in
      try await claimManyKeys(Unchecked(benchmark), variant, holdFor: nil)
    }
    Benchmark("Keys claim+load+release MainActor \(variant.rawValue) ×\(manyKeys)", configuration: timed) {
      benchmark in
      try await claimManyKeysOnMainActor(Unchecked(benchmark), variant)
    }
  }

  // Peak resident memory, sampled by the OS every ~10 ms: one iteration in a fresh process.
  let peak = Benchmark.Configuration(
    metrics: [.peakMemoryResidentDelta, .mallocBytesCount, .mallocCountTotal, .wallClock],
    warmupIterations: 0,
    maxDuration: .seconds(30),
    maxIterations: 1
  )
  for variant in KeysVariant.allCases {
    Benchmark("Keys peak memory \(variant.rawValue) ×\(manyKeys)", configuration: peak) { benchmark in
      try await claimManyKeys(Unchecked(benchmark), variant, holdFor: .milliseconds(50))
    }
  }
}

@MainActor
func claimManyKeysOnMainActor(_ benchmark: Unchecked<Benchmark>, _ variant: KeysVariant) async throws {
  try await claimManyKeys(benchmark, variant, holdFor: nil)
}

/// Claims `manyKeys` keys, waits until every one is loaded, (optionally holds them all for a
/// while, so the OS samples the peak), then releases them, measuring from the first claim to the
/// last release. Runs on the caller's executor (the main actor for the MainActor rows).
nonisolated(nonsending) func claimManyKeys(
  _ benchmark: Unchecked<Benchmark>, _ variant: KeysVariant, holdFor hold: Duration?
) async throws {
  switch variant {
  case .loadableKit:
    let loader = ContentLoader<Int, Int, Int>(load: { key in (try await fetchValue(key), 1) })
    var claims: [ContentLoader<Int, Int, Int>.Claim] = []
    claims.reserveCapacity(manyKeys)
    benchmark.value.startMeasurement()
    for key in 0..<manyKeys { claims.append(loader.begin(key)) }
    for claim in claims {
      while claim.snapshot.status != .loaded { await Task.yield() }
    }
    if let hold { try await Task.sleep(for: hold) }
    for claim in claims { claim.end() }
    benchmark.value.stopMeasurement()
  case .baseline:
    let table = TaskTable()
    var keys: [Int] = []
    keys.reserveCapacity(manyKeys)
    benchmark.value.startMeasurement()
    for key in 0..<manyKeys {
      table.begin(key)
      keys.append(key)
    }
    for key in keys { _ = try await table.value(key) }
    if let hold { try await Task.sleep(for: hold) }
    for key in keys { table.end(key) }
    benchmark.value.stopMeasurement()
    precondition(table.count == 0)
  }
}
