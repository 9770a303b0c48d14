import LoadableKit
import Synchronization

/// A `TaskExecutor` that runs nothing until a test says so, and then in the order the test
/// chooses — for exploring many interleavings of the same scenario, reproducibly.
///
/// Start the scenario's tasks with ``spawn(_:)``. Every task LoadableKit starts on their behalf
/// (attempts, cascades) runs on this executor as well, and so does every task resumed from a
/// suspension. ``run(using:maxSteps:)`` then runs the queued jobs one at a time, each time picking
/// the next job at random from the given generator, until none is left. The same seed gives the
/// same schedule, so a failing seed can be replayed.
///
/// ```swift
/// var generator = SplitMix64(seed: seed)
/// let executor = ManualTaskExecutor()
/// executor.spawn { try? await loadable.load() }
/// executor.spawn { loadable.cancelLoad() }
/// executor.run(using: &generator)     // every job, in a seeded random order
/// #expect(executor.pendingJobCount == 0)
/// ```
///
/// Jobs run on the thread that calls `run`, so nothing runs concurrently; waiting for work
/// outside the executor (a real clock, I/O) would stall the run.
public final class ManualTaskExecutor: TaskExecutor, Sendable {
  private let queue = Mutex<[UnownedJob]>([])

  /// Creates an executor with an empty queue.
  public init() {}

  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.withLock(owner: self) { $0.append(job) }
  }

  /// The number of jobs waiting to run.
  public var pendingJobCount: Int { queue.withLock(owner: self) { $0.count } }

  /// Starts `operation` as a task on this executor; LoadableKit's own tasks started from it run
  /// here too. The task does not run until ``run(using:maxSteps:)`` or ``runInOrder(maxSteps:)``.
  @discardableResult
  public func spawn(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
    TaskLaunch.executor.withValue(self) {
      Task(executorPreference: self) { await operation() }
    }
  }

  /// Runs queued jobs, choosing each one at random with `generator`, until the queue is empty or
  /// `maxSteps` jobs ran.
  /// - Returns: the number of jobs that ran.
  @discardableResult
  public func run<Generator: RandomNumberGenerator>(using generator: inout Generator, maxSteps: Int = 1_000_000) -> Int {
    var steps = 0
    while steps < maxSteps {
      let count = pendingJobCount
      guard count > 0 else { break }
      let pick = Int.random(in: 0..<count, using: &generator)
      let job = queue.withLock(owner: self) { queue in queue.remove(at: min(pick, queue.count - 1)) }
      job.runSynchronously(on: asUnownedTaskExecutor())
      steps += 1
    }
    return steps
  }

  /// Runs queued jobs first-in first-out until the queue is empty or `maxSteps` jobs ran.
  @discardableResult
  public func runInOrder(maxSteps: Int = 1_000_000) -> Int {
    var steps = 0
    while steps < maxSteps, let job = queue.withLock(owner: self, { $0.isEmpty ? nil : $0.removeFirst() }) {
      job.runSynchronously(on: asUnownedTaskExecutor())
      steps += 1
    }
    return steps
  }
}

/// A small, fast, seedable random number generator (SplitMix64), for reproducible schedules.
public struct SplitMix64: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// Creates a generator; the same seed gives the same sequence.
  public init(seed: UInt64) { state = seed }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
