import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Test support for the Jobs tests: work types whose effects are recorded in a ledger keyed by a
// per-test id, and latches to hold the work at a known point. Nothing here sleeps.

/// An object whose address names a static mutex's critical section for ThreadSanitizer.
final class JobSentinel: Sendable {}

/// What the work did, per test id: the units it started and finished, and its runs.
enum JobLedger {
  private static let entries = Mutex<[String: Entry]>([:])
  private static let owner = JobSentinel()

  struct Entry: Sendable {
    var started: [Int] = []
    var finished: [Int] = []
    var runs = 0
  }

  static func update(_ id: String, _ body: (inout Entry) -> Void) {
    entries.withLock(owner: owner) { body(&$0[id, default: Entry()]) }
  }

  static subscript(id: String) -> Entry {
    entries.withLock(owner: owner) { $0[id] ?? Entry() }
  }
}

/// JobHooks that the work awaits before a unit, per test id.
enum JobHooks {
  typealias Hook = @Sendable (_ unit: Int) async throws -> Void
  private static let hooks = Mutex<[String: Hook]>([:])
  private static let owner = JobSentinel()

  static func set(_ id: String, _ hook: @escaping Hook) {
    hooks.withLock(owner: owner) { $0[id] = hook }
  }

  static func before(_ id: String, unit: Int) async throws {
    let hook = hooks.withLock(owner: owner) { $0[id] }
    try await hook?(unit)
  }
}

/// A one-shot gate. `wait()` ignores cancellation on purpose: it models work that does.
final class JobLatch: Sendable {
  private let state = Mutex<(isOpen: Bool, waiters: [UnsafeContinuation<Void, Never>])>((false, []))

  func wait() async {
    await withUnsafeContinuation { continuation in
      let isOpen = state.withLock(owner: self) { state in
        if !state.isOpen { state.waiters.append(continuation) }
        return state.isOpen
      }
      if isOpen { continuation.resume() }
    }
  }

  var isOpen: Bool { state.withLock(owner: self) { $0.isOpen } }

  func open() {
    let waiters = state.withLock(owner: self) { state in
      state.isOpen = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// Counts units `0..<units`; its output is the sum of the squares of the units, carried in the
/// checkpoint, so a resumed run gets the same output only if it really resumed from the checkpoint.
struct CountingWork: JobWork {
  struct Progress: Codable, Sendable, Equatable {
    var next: Int
    var sum: Int
  }
  static let kind = "test.counting"
  var id: String
  var units: Int

  init(id: String = UUID().uuidString, units: Int) {
    self.id = id
    self.units = units
  }

  func run(in context: JobContext<Progress>) async throws -> Int {
    JobLedger.update(id) { $0.runs += 1 }
    var progress = context.checkpoint ?? Progress(next: 0, sum: 0)
    while progress.next < units {
      try await context.pausePoint()
      let unit = progress.next
      JobLedger.update(id) { $0.started.append(unit) }
      try await JobHooks.before(id, unit: unit)
      JobLedger.update(id) { $0.finished.append(unit) }
      progress = Progress(next: unit + 1, sum: progress.sum + unit * unit)
      context.saveCheckpoint(progress)
      context.reportProgress(completed: progress.next, total: units)
    }
    context.post("counted \(units) units")
    return progress.sum
  }

  /// The output of an uninterrupted run.
  var expectedOutput: Int { (0..<units).reduce(0) { $0 + $1 * $1 } }
}

struct JobTestFailure: Error, Equatable, CustomStringConvertible {
  var reason: String
  var description: String { "JobTestFailure(\(reason))" }
}

/// A run-by-run script: each run (attempt) does what its step says. Used for transient errors,
/// progress and messages.
struct ScriptedWork: JobWork {
  enum Action: Codable, Sendable, Equatable {
    case report(completed: Int, total: Int)
    case reportFraction(Double)
    case post(String, JobMessage.Severity)
    case checkpoint(Int)
    case pausePoint
    /// Awaits the hook for this action's index.
    case hook
    case fail(transient: Bool)
  }
  static let kind = "test.scripted"
  var id: String = UUID().uuidString
  /// The actions of each run; the last entry repeats for later runs.
  var runs: [[Action]]
  var output = "done"

  func run(in context: JobContext<Int>) async throws -> String {
    let run = JobLedger[id].runs
    JobLedger.update(id) { $0.runs += 1 }
    for (index, action) in runs[min(run, runs.count - 1)].enumerated() {
      switch action {
      case .report(let completed, let total): context.reportProgress(completed: completed, total: total)
      case .reportFraction(let fraction): context.reportProgress(fractionCompleted: fraction)
      case .post(let text, let severity): context.post(text, severity: severity)
      case .checkpoint(let value): context.saveCheckpoint(value)
      case .pausePoint: try await context.pausePoint()
      case .hook: try await JobHooks.before(id, unit: index)
      case .fail(let transient): throw transient ? JobTransientError(run: run + 1) : JobTestFailure(reason: "run \(run + 1)")
      }
    }
    return output
  }
}

struct JobTransientError: Error, Equatable {
  var run: Int
}

/// Work whose parameters cannot be encoded.
struct UnencodableWork: JobWork {
  static let kind = "test.unencodable"
  func run(in context: JobContext<Int>) async throws -> Int { 0 }
  func encode(to encoder: any Encoder) throws {
    throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "nope"))
  }
  init() {}
  init(from decoder: any Decoder) throws {}
}

extension Job {
  /// The statuses the job goes through from now on, the current one first, until it finishes.
  var statusUpdates: AsyncStream<JobStatus> {
    let events = self.events
    return AsyncStream { continuation in
      let task = Task {
        for await event in events {
          switch event {
          case .snapshot(let snapshot): continuation.yield(snapshot.status)
          case .status(let status): continuation.yield(status)
          case .progress, .message: break
          }
        }
        continuation.finish()
      }
      continuation.onTermination = { _ in task.cancel() }
    }
  }

  /// Waits until the job's status is `status` (returns at once if it is).
  func waitFor(_ status: JobStatus) async {
    for await current in statusUpdates where current == status { return }
  }
}

/// A hook that reports arriving at `unit` and then waits on a test clock that nobody advances:
/// the work is held there until the job is cancelled (the sleep is cancellable).
func holdJobAt(_ unit: Int, on clock: TestClock) -> JobHooks.Hook {
  { current in
    if current == unit { try await clock.sleep(for: .seconds(3600)) }
  }
}

/// A hook that signals `arrived` at `unit` and waits for `release`, ignoring cancellation.
func latchJobAt(_ unit: Int, arrived: JobLatch, release: JobLatch) -> JobHooks.Hook {
  { current in
    guard current == unit else { return }
    arrived.open()
    await release.wait()
  }
}

/// Starts `job`, whose work calls its hooks under `hookID`, and returns once the work is held
/// just before `unit`; open the latch returned to let the work go on.
func start<Work: JobWork>(_ job: Job<Work>, hookID: String, heldAt unit: Int) async -> JobLatch {
  let arrived = JobLatch()
  let release = JobLatch()
  JobHooks.set(hookID, latchJobAt(unit, arrived: arrived, release: release))
  job.start()
  await arrived.wait()
  return release
}

/// Starts a job of `CountingWork(units:)` and returns once its work is held just before `unit`;
/// open `release` to let the work go on.
func startJob(units: Int, heldAt unit: Int) async -> (job: Job<CountingWork>, work: CountingWork, release: JobLatch) {
  let work = CountingWork(units: units)
  let job = Job(work)
  return (job, work, await start(job, hookID: work.id, heldAt: unit))
}

extension AsyncStream {
  /// Every element, until the stream finishes.
  func collect() async -> [Element] {
    var elements: [Element] = []
    for await element in self { elements.append(element) }
    return elements
  }
}
