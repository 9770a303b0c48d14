// A plain executable for instruction-level profiling of one scenario at a time, without the
// benchmark harness (whose malloc interposer valgrind cannot run):
//
//   swift build -c release --package-path Benchmarks --product loadable-profile
//   valgrind --tool=callgrind Benchmarks/.build/release/loadable-profile fetchIfNeeded 100000
//
// callgrind counts instructions, so the numbers repeat whatever else the machine is doing.

import Dispatch
import LoadableKit
import Synchronization

/// A job whose work reports progress once per item.
struct ProgressWork: JobWork {
  typealias Output = Int
  typealias Checkpoint = Int
  static let kind = "org.loadablekit.profile.progress"
  var count: Int

  func run(in context: JobContext<Int>) async throws -> Int {
    for item in 0..<count { context.reportProgress(completed: item + 1, total: count) }
    return count
  }
}

final class Shared<Value: Sendable>: Sendable {
  let value: Mutex<Value>
  init(_ value: Value) { self.value = Mutex(value) }
}

@inline(never) func consume<T>(_ value: T) { withExtendedLifetime(value) {} }

/// Returns once `object()` is `nil` (what a scenario released is freed, on whichever thread).
/// Sleeps between looks, not yields: a loop of yields would count instructions for as long as
/// the other thread takes.
func whenFreed(_ object: () -> AnyObject?) async {
  while object() != nil { try? await Task.sleep(for: .milliseconds(2)) }
}

/// The map graph's baseline (Benchmarks' Graph.swift, `Memo` and `HandWrittenGraph`): each node
/// behind a `Mutex`-protected in-flight `Task` or value, layers loaded by a task group. A copy, as
/// this tool's other baselines are: in a module both executables import, the generic `Memo` would
/// be called unspecialized from the benchmark, and measure something else there.
final class Memo<Value: Sendable>: Sendable {
  private enum State {
    case idle
    case running(Task<Value, any Error>)
    case done(Value)
  }
  private enum Next {
    case value(Value)
    case wait(Task<Value, any Error>)
  }
  private let state = Mutex(State.idle)

  func value(_ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
    let next = state.withLock { state -> Next in
      switch state {
      case .done(let value): return .value(value)
      case .running(let task): return .wait(task)
      case .idle:
        let task = Task { try await operation() }
        state = .running(task)
        return .wait(task)
      }
    }
    switch next {
    case .value(let value): return value
    case .wait(let task):
      let value = try await task.value
      state.withLock { $0 = .done(value) }
      return value
    }
  }
}

struct PortalUnreachable: Error {}

final class MemoGraph: Sendable {
  private let portalMemo = Memo<Int>()
  private let itemMemos = (0..<50).map { _ in Memo<Int>() }
  private let tableMemos = (0..<50).map { _ in Memo<Int>() }
  private let layerMemos = (0..<50).map { _ in Memo<Int>() }
  private let mapMemo = Memo<Int>()

  func portal() async throws -> Int { try await portalMemo.value { 1_000 } }
  func item(_ index: Int) async throws -> Int {
    try await itemMemos[index].value { [self] in try await portal() + index }
  }
  func table(_ index: Int) async throws -> Int {
    try await tableMemos[index].value { [self] in
      _ = try await item(index)
      return index
    }
  }
  func layer(_ index: Int) async throws -> Int {
    try await layerMemos[index].value { [self] in
      async let table = table(index)
      async let item = item(index)
      return try await table + item
    }
  }
  func map() async throws -> Int {
    try await mapMemo.value { [self] in
      try await withThrowingDiscardingTaskGroup { group in
        for index in 0..<50 { group.addTask { _ = try await self.layer(index) } }
      }
      return -1
    }
  }
}

/// A fresh, unloaded map graph (Benchmarks' Graph.swift, `LoadableGraph`): 1 map, 50 layers,
/// each over a table and an item, one shared portal. Returns the map.
func makeGraph(portalFailures: Int = 0) -> AsyncLoadable<Int> {
  let failuresLeft = Atomic(portalFailures)
  let portal = AsyncLoadable<Int> {
    if failuresLeft.load(ordering: .relaxed) > 0, failuresLeft.subtract(1, ordering: .relaxed).newValue >= 0 {
      throw PortalUnreachable()
    }
    return 1_000
  }
  let map = AsyncLoadable<Int> { -1 }
  for index in 0..<50 {
    let item = portal.flatMap { info in AsyncLoadable<Int> { info + index } }
    let table = AsyncLoadable<Int> { index }
    table.addDependency(item)
    map.addDependency(zip(table, item).map { $0 + $1 })
  }
  return map
}

// A synchronous main that blocks on a semaphore: valgrind 3.19 crashes on an `async` main, whose
// main thread parks in dispatch_main.
let arguments = CommandLine.arguments.dropFirst()
// A scenario name ending in `@ui` runs it at `.userInitiated` priority (the priority of a visible
// claim's load) instead of the default.
let named = arguments.first ?? "help"
let scenario = named.hasSuffix("@ui") ? String(named.dropLast(3)) : named
let priority: TaskPriority? = named.hasSuffix("@ui") ? .userInitiated : nil
let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 100_000
let victimCount = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 100
let done = DispatchSemaphore(value: 0)
Task.detached(priority: priority) {
  do { try await run(scenario, count: count) } catch { fatalError("\(error)") }
  done.signal()
}
done.wait()

nonisolated func run(_ scenario: String, count: Int) async throws {
switch scenario {
case "load":
  let loadable = AsyncLoadable<Int> { 42 }
  try await loadable.load()
  for _ in 0..<count { try await loadable.load() }
case "fetchIfNeeded":
  let loadable = AsyncLoadable<Int> { 42 }
  try await loadable.load()
  for _ in 0..<count { consume(try await loadable.fetchIfNeeded()) }
case "content":
  let loadable = AsyncLoadable<Int> { 42 }
  try await loadable.load()
  for _ in 0..<count { consume(loadable.content) }
case "status":
  let loadable = AsyncLoadable<Int> { 42 }
  try await loadable.load()
  for _ in 0..<count { consume(loadable.loadStatus) }
case "loadsnapshot":
  // An AsyncLoadable's snapshot (`snapshot` is a claim's).
  let loadable = AsyncLoadable<Int> { 42 }
  try await loadable.load()
  for _ in 0..<count { consume(loadable.snapshot) }
case "create":
  for key in 0..<count { consume(AsyncLoadable<Int> { key }) }
case "coalesce":
  let started = Shared(0)
  let gate = Shared<UnsafeContinuation<Void, Never>?>(nil)
  let gated = AsyncLoadable<Int> {
    await withUnsafeContinuation { c in gate.value.withLock { $0 = c } }
    return 42
  }
  try await withThrowingDiscardingTaskGroup { group in
    for _ in 0..<count {
      group.addTask {
        started.value.withLock { $0 += 1 }
        try await gated.load()
      }
    }
    while started.value.withLock({ $0 }) < count || gate.value.withLock({ $0 == nil }) { await Task.yield() }
    try await Task.sleep(for: .milliseconds(20))
    gate.value.withLock { $0 }!.resume()
  }
case "cancel":
  // `count` waiters park on one load; 100 more join and are cancelled one at a time.
  let gate = Shared<UnsafeContinuation<Void, Never>?>(nil)
  let gated = AsyncLoadable<Int> {
    await withUnsafeContinuation { c in gate.value.withLock { $0 = c } }
    return 42
  }
  let started = Shared(0)
  try await withThrowingDiscardingTaskGroup { group in
    for _ in 0..<count {
      group.addTask {
        started.value.withLock { $0 += 1 }
        try await gated.load()
      }
    }
    let victims = (0..<victimCount).map { _ in
      Task {
        started.value.withLock { $0 += 1 }
        try await gated.load()
      }
    }
    while started.value.withLock({ $0 }) < count + victimCount || gate.value.withLock({ $0 == nil }) {
      await Task.yield()
    }
    try await Task.sleep(for: .milliseconds(20))
    for victim in victims {
      victim.cancel()
      _ = await victim.result
    }
    gate.value.withLock { $0 }!.resume()
  }
case "mapchain":
  weak var released: AsyncLoadable<Int>?
  do {
    let root = AsyncLoadable<Int> { 0 }
    var end = root
    for _ in 0..<count { end = end.map { $0 + 1 } }
    try await end.load()
    precondition(end.content == count)
    released = root
  }
  // The chain's last steps (its attempts' contexts, which hold the views) may still be ending on
  // the thread that ran them after `load()` returned: the whole chain is freed before the
  // process exits, every run, so that the release is counted the same way in both scenarios.
  await whenFreed { released }
case "flatmap":
  // `count` fresh `flatMap`s, each over a fresh source, loaded by a caller (an app's
  // `item.flatMap { … }.load()`): the source and the inner loadable load on tasks of their own.
  for _ in 0..<count {
    let source = AsyncLoadable<Int> { 1 }
    let view = source.flatMap { value in AsyncLoadable<Int> { value + 1 } }
    try await view.load()
    precondition(view.content == 2)
  }
case "mapchain-unloaded":
  // The map chain built and released without a load: `mapchain` minus this is the load alone,
  // which is what the benchmark times.
  weak var released: AsyncLoadable<Int>?
  do {
    let root = AsyncLoadable<Int> { 0 }
    var end = root
    for _ in 0..<count { end = end.map { $0 + 1 } }
    consume(end)
    released = root
  }
  await whenFreed { released }
case "zip-unloaded":
  // The zip's inputs and the zip built and released without a load (see `mapchain-unloaded`).
  let inputs = (0..<count).map { index in AsyncLoadable<Int> { index } }
  consume(zip(inputs))
case "taskchain":
  // The map chain's baseline (Benchmarks' Pipelines.swift): as many tasks, each awaiting the one
  // before and adding one.
  var end = Task<Int, any Error> { 0 }
  for _ in 0..<count {
    let previous = end
    end = Task { try await previous.value + 1 }
  }
  let value = try await end.value
  precondition(value == count)
case "taskgroup":
  // The zip's baseline: a task group running as many closures.
  let inputs: [@Sendable () async throws -> Int] = (0..<count).map { index in { index } }
  let values = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
    for (index, input) in inputs.enumerated() { group.addTask { (index, try await input()) } }
    var values = [Int](repeating: 0, count: count)
    for try await (index, value) in group { values[index] = value }
    return values
  }
  precondition(values.count == count)
case "zip":
  let inputs = (0..<count).map { index in AsyncLoadable<Int> { index } }
  let zipped = zip(inputs)
  try await zipped.load()
  precondition(zipped.content?.count == count)
case "claim":
  // claim begin+end on a key that is loaded and held by another claim.
  let loader = ContentLoader<Int, Int, Int>(load: { key in (key, 1) })
  // Awaited, not polled: a polling loop's varying number of reads would swamp the per-claim
  // difference between two runs. (Not through `loadable(for:)`: a key handed out is referenced
  // weakly, so its retains and releases take the runtime's slow path, and the benchmark's aren't.)
  var events: AsyncStream<ContentLoader<Int, Int, Int>.Event>.Iterator? = loader.events.makeAsyncIterator()
  let holder = loader.begin(0)
  while let event = await events?.next() {
    if case .loaded = event { break }
  }
  events = nil
  for _ in 0..<count { loader.begin(0).end() }
  holder.end()
case "snapshot":
  // A claim's snapshot read on a loaded key: what a list's cell does on every draw.
  let loader = ContentLoader<Int, Int, Int>(load: { key in (key, 1) })
  let claim = loader.begin(0)
  try await loader.loadable(for: 0).load()
  for _ in 0..<count { consume(claim.snapshot) }
  claim.end()
case "churn":
  // Scroll churn (Benchmarks' ContentLoader.swift): `count` keys claimed in order, 20 visible at
  // a time; every load is still running when its claim ends, and is cancelled.
  let loader = ContentLoader<Int, Int, Int>(maximumIdleCount: 100, load: { key in
    try await Task.sleep(for: .seconds(60))
    return (key, 1)
  })
  var visible: [ContentLoader<Int, Int, Int>.Claim] = []
  let started = ContinuousClock.now
  for key in 0..<count {
    if visible.count == 20 { visible.removeFirst().end() }
    visible.append(loader.begin(key))
  }
  for claim in visible { claim.end() }
  if count > 0 { print("churn: \((ContinuousClock.now - started) / count) a key") }
  // Let the cancelled loads wind down.
  try await Task.sleep(for: .seconds(2))
  precondition(loader.count <= 100)
case "churn-baseline":
  // `churn`'s scroll over the hand-written keyed loader of the benchmark's baseline (a claim count
  // and a task per key behind one `Mutex`, `TaskTable` in ContentLoaderKeys.swift): the
  // instructions a key costs without LoadableKit, for the row's ratio in instructions.
  let table = Mutex<[Int: (claims: Int, task: Task<Int, any Error>)]>([:])
  func begin(_ key: Int) {
    table.withLock { entries in
      if entries[key] != nil {
        entries[key]!.claims += 1
      } else {
        entries[key] = (1, Task(priority: .userInitiated) {
          try await Task.sleep(for: .seconds(60))
          return key
        })
      }
    }
  }
  func end(_ key: Int) {
    let removed = table.withLock { entries -> Task<Int, any Error>? in
      guard var entry = entries[key] else { return nil }
      entry.claims -= 1
      if entry.claims > 0 {
        entries[key] = entry
        return nil
      }
      return entries.removeValue(forKey: key)?.task
    }
    removed?.cancel()
  }
  var visible: [Int] = []
  for key in 0..<count {
    if visible.count == 20 { end(visible.removeFirst()) }
    begin(key)
    visible.append(key)
  }
  for key in visible { end(key) }
  try await Task.sleep(for: .seconds(2))  // as `churn` does: the cancelled tasks wind down
  precondition(table.withLock { $0.isEmpty })
case "keys":
  // `count` keys claimed in a ContentLoader, waited for until loaded, then released
  // (Benchmarks' ContentLoaderKeys.swift).
  // The loads count themselves, and the last one's caller is resumed: waiting by polling the
  // claims' snapshots (as the benchmark does) reads them a varying number of times, which would
  // swamp the difference between two runs.
  let loaded = Shared(0)
  let allStarted = Shared<UnsafeContinuation<Void, Never>?>(nil)
  let total = count
  let loader = ContentLoader<Int, Int, Int>(load: { key in
    let last = loaded.value.withLock { count in
      count += 1
      return count == total
    }
    if last { allStarted.value.withLock { $0 }?.resume() }
    return (key, 1)
  })
  var claims: [ContentLoader<Int, Int, Int>.Claim] = []
  claims.reserveCapacity(count)
  if count > 0 {
    await withUnsafeContinuation { continuation in
      allStarted.value.withLock { $0 = continuation }
      for key in 0..<count { claims.append(loader.begin(key)) }
    }
  }
  for claim in claims {
    while claim.snapshot.status != .loaded { await Task.yield() }
  }
  for claim in claims { claim.end() }
case "keys-baseline":
  // `keys` over the benchmark's baseline (a claim count and a task per key behind one `Mutex`):
  // every key claimed, its task's value awaited, every claim ended.
  let table = Mutex<[Int: (claims: Int, task: Task<Int, any Error>)]>([:])
  for key in 0..<count {
    table.withLock { entries in
      if entries[key] != nil {
        entries[key]!.claims += 1
      } else {
        entries[key] = (1, Task { key })
      }
    }
  }
  for key in 0..<count {
    let task = table.withLock { $0[key]!.task }
    _ = try await task.value
  }
  for key in 0..<count {
    let removed = table.withLock { entries -> Task<Int, any Error>? in
      entries[key]!.claims -= 1
      return entries[key]!.claims > 0 ? nil : entries.removeValue(forKey: key)?.task
    }
    removed?.cancel()
  }
case "graph":
  // `count` loads of a fresh map graph (Benchmarks' Graph.swift): 1 map, 50 layers, each over a
  // table and an item, one shared portal.
  for _ in 0..<count { try await makeGraph().load() }
case "graph-retry", "graph-failed":
  // `graph-retry`: `count` fresh map graphs whose portal fails its first call, each loaded (which
  // fails everywhere) and then retried (`retryLoad()` of the map, as the benchmark's `retryLoad`
  // rows); `graph-failed` stops after the failed load: `graph-retry` minus it is the retry alone.
  for _ in 0..<count {
    let map = makeGraph(portalFailures: 1)
    do {
      try await map.load()
      preconditionFailure("the portal did not fail")
    } catch is PortalUnreachable {}
    if scenario == "graph-retry" { try await map.retryLoad() }
  }
case "graph-unloaded":
  // The map graph built and released without a load: `graph` minus this is the load alone.
  for _ in 0..<count { consume(makeGraph()) }
case "memograph":
  // The map graph's baseline, written by hand (Benchmarks' Graph.swift): built and loaded.
  for _ in 0..<count {
    let value = try await MemoGraph().map()
    precondition(value == -1)
  }
case "progress":
  let job = Job(ProgressWork(count: count))
  job.start()
  let output = try await job.output
  precondition(output == count)
default:
  print("usage: loadable-profile load|fetchIfNeeded|content|create|coalesce|cancel|flatmap|mapchain|zip|claim|keys|graph|graph-unloaded|memograph|progress [count] [victims]")
}
}
