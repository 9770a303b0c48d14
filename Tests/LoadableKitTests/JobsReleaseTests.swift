import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Every user value a job holds (checkpoint, error, output, handlers) is released after the job's
// lock is released, on every path that replaces or drops it. Each value's `deinit` reads the job,
// which takes its lock: released under the lock it stops the process with "Recursive call to lock
// Mutex", so each scenario runs in an exit test.

/// Calls `action` when it is deallocated.
final class DeinitProbe: Sendable {
  let action: @Sendable () -> Void
  init(_ action: @escaping @Sendable () -> Void) { self.action = action }
  deinit { action() }
}

/// The job a probe reads in its `deinit`, and how many probes did.
final class ProbeTarget: Sendable {
  private let reader = Mutex<(@Sendable () -> Void)?>(nil)
  let reads = Atomic<Int>(0)
  /// Lets work that ignores cancellation return.
  let release = JobLatch()
  /// Opens when work that ignores cancellation waits for ``release``.
  let arrived = JobLatch()
  /// Opens once `expected` probes were released.
  let allReleased = JobLatch()
  let expected = Atomic<Int>(.max)

  func attach<Work: JobWork>(_ job: Job<Work>) {
    reader.withLock(owner: self) { $0 = { [weak job] in _ = job?.status; _ = job?.messages } }
  }

  func probe() -> DeinitProbe {
    DeinitProbe { [self] in
      let read = reader.withLock(owner: self) { $0 }
      read?()
      let count = reads.wrappingAdd(1, ordering: .relaxed).newValue
      if count >= expected.load(ordering: .relaxed) { allReleased.open() }
    }
  }
}

/// A checkpoint whose `deinit` reads the job.
final class ProbedCheckpoint: Codable, Sendable {
  let value: Int
  let probe: DeinitProbe?
  init(_ value: Int, probe: DeinitProbe?) {
    self.value = value
    self.probe = probe
  }
  enum CodingKeys: CodingKey { case value }
  init(from decoder: any Decoder) throws {
    value = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .value)
    probe = nil
  }
  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(value, forKey: .value)
  }
}

/// An error and an output whose `deinit` reads the job.
final class ProbedError: Error, Sendable {
  let probe: DeinitProbe
  init(_ probe: DeinitProbe) { self.probe = probe }
}

final class ProbedOutput: Sendable {
  let probe: DeinitProbe
  init(_ probe: DeinitProbe) { self.probe = probe }
}

/// Work whose checkpoints, error and output are probes on the target registered under `id`.
struct ProbedWork: JobWork {
  enum Ending: String, Codable, Sendable { case succeed, fail, ignoreCancellation }
  static let kind = "test.probed"
  var id: String
  var checkpoints: Int
  var ending: Ending

  static let targets = Mutex<[String: ProbeTarget]>([:])
  static let owner = JobSentinel()
  static func target(_ id: String) -> ProbeTarget {
    targets.withLock(owner: owner) { $0[id, default: ProbeTarget()] }
  }
  static func register(_ id: String) -> ProbeTarget {
    let target = ProbeTarget()
    targets.withLock(owner: owner) { $0[id] = target }
    return target
  }

  func run(in context: JobContext<ProbedCheckpoint>) async throws -> ProbedOutput {
    let target = Self.target(id)
    let first = (context.checkpoint?.value ?? 0) + 1
    for value in first..<(first + checkpoints) {
      context.saveCheckpoint(ProbedCheckpoint(value, probe: target.probe()))
      try await context.pausePoint()
    }
    switch ending {
    case .succeed:
      return ProbedOutput(target.probe())
    case .fail:
      throw ProbedError(target.probe())
    case .ignoreCancellation:
      target.arrived.open()
      await target.release.wait()  // ignores the cancellation
      return ProbedOutput(target.probe())
    }
  }
}

/// The paths on which a job replaces or drops a user value.
enum ReleasePath: String, Codable, Sendable, CaseIterable {
  /// `saveCheckpoint` replaces the previous checkpoint.
  case checkpointReplaced
  /// A job restored from JSON saves a checkpoint over the restored one.
  case restoredCheckpointReplaced
  /// The job succeeds; then it is deallocated with its checkpoint and output.
  case finishThenDeinit
  /// The job fails with the error; then it is deallocated.
  case failThenDeinit
  /// The job is cancelled; the work ignores it and returns an output, which is dropped.
  case cancelDropsOutput
  /// Status and completion handlers are released once the job finished.
  case handlersReleased

  /// Runs the scenario; the process stops if a value is released under the job's lock.
  func run() async {
    let id = UUID().uuidString
    let target = ProbedWork.register(id)
    var expectedReads = 0
    switch self {
    case .checkpointReplaced:
      let job = Job(ProbedWork(id: id, checkpoints: 3, ending: .succeed))
      target.attach(job)
      job.start()
      _ = try? await job.output
      expectedReads = 2  // checkpoints 1 and 2 were replaced
    case .restoredCheckpointReplaced:
      // A checkpoint from the JSON has no probe; save two so the first probed one is replaced.
      let job = try! Job<ProbedWork>.fromJSON(
        Job(ProbedWork(id: id, checkpoints: 2, ending: .succeed)).toJSON())
      target.attach(job)
      job.start()
      _ = try? await job.output
      expectedReads = 1
    case .finishThenDeinit:
      do {
        let job = Job(ProbedWork(id: id, checkpoints: 1, ending: .succeed))
        target.attach(job)
        job.start()
        _ = try? await job.output
      }
      expectedReads = 2  // the last checkpoint and the output, when the job goes
    case .failThenDeinit:
      do {
        let job = Job(ProbedWork(id: id, checkpoints: 1, ending: .fail))
        target.attach(job)
        job.start()
        _ = try? await job.output
        _ = job.error
      }
      expectedReads = 2  // the last checkpoint and the error
    case .cancelDropsOutput:
      let job = Job(ProbedWork(id: id, checkpoints: 0, ending: .ignoreCancellation))
      target.attach(job)
      let release = Task {
        await job.waitFor(.canceling)
        target.release.open()
      }
      job.start()
      await target.arrived.wait()
      await job.cancel()
      await release.value
      expectedReads = 1  // the dropped output, released by the work's task
    case .handlersReleased:
      do {
        let job = Job(ProbedWork(id: id, checkpoints: 0, ending: .succeed))
        target.attach(job)
        let statusProbe = target.probe()
        let completionProbe = target.probe()
        let done = JobLatch()
        job.start(statusHandler: { _ in _ = statusProbe }) { _ in
          _ = completionProbe
          done.open()
        }
        await done.wait()
        _ = try? await job.output
      }
      expectedReads = 3  // both handlers and the output
    }
    // The job goes when its work's task ends, which may be just after the awaited output: wait for
    // the probes (a leak hangs here, and the exit test's time limit reports it).
    target.expected.store(expectedReads, ordering: .relaxed)
    if target.reads.load(ordering: .relaxed) < expectedReads { await target.allReleased.wait() }
    let reads = target.reads.load(ordering: .relaxed)
    if reads < expectedReads {
      print("\(self): \(reads) of \(expectedReads) probes were released")
      exit(2)
    }
  }
}

@Suite("Jobs: user values released outside the lock", .serialized, .timeLimit(.minutes(2)))
struct JobsReleaseTests {
  @Test(arguments: ReleasePath.allCases)
  func userValuesAreReleasedAfterTheLock(_ path: ReleasePath) async {
    await #expect(processExitsWith: .success) { [path] in
      await path.run()
    }
  }
}
