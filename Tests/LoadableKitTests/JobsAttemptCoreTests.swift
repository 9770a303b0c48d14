import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A job's run is an attempt of the one attempt core: the callers of `output` are the attempt's
/// waiters, its task is the attempt's task, and its end is delivered by the core's performer, in
/// the one order of effects.
@Suite("Jobs: the run on the attempt core", .timeLimit(.minutes(2)))
struct JobsAttemptCoreTests {
  /// Three child tasks parked at pause points at once (`JobsStressTests`, which parks them
  /// together, may find only one parked at a time): a start resumes every one of them, a cancel
  /// stops every one — not only the first.
  @Test(arguments: [false, true])
  func everyChildTaskParkedAtOnceResumesOrStops(cancelling: Bool) async throws {
    let work = ParkingChildren()
    let entered = (0..<3).map { _ in JobLatch() }
    let release = JobLatch()
    JobHooks.set(work.id) { child in
      entered[child].open()
      await release.wait()
    }
    let job = Job(work)
    job.start()
    for latch in entered { await latch.wait() }  // each child is at its hook, the job running
    job.pause()
    release.open()  // each child goes on to its pause point, and parks there
    await eventually { job.waiterCountForTesting == 3 }
    #expect(job.status == .paused)
    if cancelling {
      let cancel = Task { await job.cancel() }
      await eventually { job.status.isFinished }
      if job.status.isFinished { _ = await cancel.value }
    } else {
      job.start()
      await eventually { job.status == .succeeded }
      if job.status == .succeeded { #expect(try await job.output == 3) }
    }
  }


  /// A job's outcome is stored once, in its run's attempt: the job's state keeps a copy only
  /// from the job's end until the run holds it (its observers are told in between, and may add
  /// others, which get it from that copy: `JobsObservationTests`).
  @Test func theJobKeepsNoCopyOfItsOutcomeOnceItsRunHoldsIt() async throws {
    let job = Job(ScriptedWork(runs: [[]], output: "kept"))
    job.start()
    #expect(try await job.output == "kept")
    await eventually { job.withState { $0.concluding == nil } }
    #expect(try job.run.knownOutcome?.get() == "kept")
  }

  /// 10,000 callers of `output` join and are cancelled: each throws `CancellationError`, its slot
  /// is freed as it leaves (nothing per caller is kept until the job ends), and the caller that
  /// stayed still gets the output.
  @Test func tenThousandOutputCallersThatLeaveKeepNoMemory() {
    let executor = ManualTaskExecutor()
    let job = Job(ScriptedWork(runs: [[]], output: "kept"))
    let outcomes = Recorder<String>()
    executor.spawn {
      do { outcomes.append("stayed: " + (try await job.output)) } catch { outcomes.append("stayed: \(error)") }
    }
    let leavers = (0..<10_000).map { _ in
      executor.spawn {
        do {
          _ = try await job.output
          outcomes.append("left: output")
        } catch is CancellationError {
          outcomes.append("left: cancelled")
        } catch {
          outcomes.append("left: \(error)")
        }
      }
    }
    executor.runInOrder()  // every caller waits; the job has not started
    #expect(job.waiterCountForTesting == 10_001)
    #expect(job.storedOutputWaiterSlotsForTesting == 10_001)

    for leaver in leavers { leaver.cancel() }
    executor.runInOrder()
    #expect(job.waiterCountForTesting == 1)
    #expect(job.storedOutputWaiterSlotsForTesting <= 32, "the slots of callers that left are freed as they leave")

    executor.spawn { job.start() }
    executor.runInOrder()
    let values = outcomes.values
    #expect(values.filter { $0 == "left: cancelled" }.count == 10_000)
    #expect(values.filter { $0.hasPrefix("stayed") } == ["stayed: kept"])
    #expect(job.status == .succeeded)
    #expect(job.waiterCountForTesting == 0)
    #expect(job.storedOutputWaiterSlotsForTesting == 0)
  }

  /// Observers hear of the end before the callers of `output` resume, on every path that ends a
  /// job: success (also `JobsBoundsTests`), failure, a cancel while the work runs, and a cancel
  /// before it ran — as an `AsyncLoadable`'s observers hear of an attempt's end before its callers.
  @Test(arguments: ["succeed", "fail", "cancelRunning", "cancelNotStarted"])
  func observersHearOfTheEndBeforeOutputCallersResume(_ ending: String) async {
    let executor = ManualTaskExecutor()
    let log = Recorder<String>()
    let arrived = JobLatch()
    let release = JobLatch()
    let script: [ScriptedWork.Action] = ending == "fail" ? [.hook, .fail(transient: false)] : [.hook]
    let work = ScriptedWork(runs: [script])
    JobHooks.set(work.id, latchJobAt(0, arrived: arrived, release: release))
    let job = Job(work)
    executor.spawn {
      for await event in job.events {
        if case .status(let status) = event, status.isFinished { log.append("event \(status)") }
      }
    }
    executor.spawn {
      do {
        _ = try await job.output
        log.append("output")
      } catch {
        log.append("output threw")
      }
    }
    executor.runInOrder()  // both wait now
    switch ending {
    case "cancelNotStarted":
      executor.spawn { _ = await job.cancel() }
      executor.runInOrder()
      #expect(log.values == ["event failed", "output threw"])
    case "cancelRunning":
      executor.spawn { job.start() }
      executor.runInOrder()
      await arrived.wait()
      executor.spawn { _ = await job.cancel() }
      executor.runInOrder()
      #expect(job.status == .canceling)
      #expect(log.values.isEmpty, "the job ends when its work stops")
      executor.spawn { release.open() }  // the work ignored the cancellation; now it returns
      executor.runInOrder()
      #expect(log.values == ["event failed", "output threw"])
    default:
      executor.spawn { job.start() }
      executor.runInOrder()
      await arrived.wait()
      executor.spawn { release.open() }
      executor.runInOrder()
      #expect(log.values == (ending == "succeed" ? ["event succeeded", "output"] : ["event failed", "output threw"]))
    }
  }

  /// The run's attempt ends with the job: a caller of `output` that arrives after the end gets
  /// the job's outcome at once, whichever way it ended; and one that arrives at a job restored
  /// after it finished gets `outputNotPersisted`.
  @Test func theOutcomeIsKeptForLaterCallers() async throws {
    let succeeded = Job(ScriptedWork(runs: [[]], output: "first"))
    succeeded.start()
    #expect(try await succeeded.output == "first")
    #expect(try await succeeded.output == "first")

    let failed = Job(ScriptedWork(runs: [[.fail(transient: false)]]))
    failed.start()
    await #expect(throws: JobTestFailure.self) { try await failed.output }
    await #expect(throws: JobTestFailure.self) { try await failed.output }

    let cancelled = Job(ScriptedWork(runs: [[]]))
    #expect(await cancelled.cancel())
    await #expect(throws: CancellationError.self) { try await cancelled.output }
    #expect(cancelled.waiterCountForTesting == 0)

    let restored = try Job<ScriptedWork>.fromJSON(succeeded.toJSON())
    let error = await #expect(throws: JobError.self) { try await restored.output }
    #expect(error?.code == .outputNotPersisted)
    #expect(restored.start() == false)
  }

  /// A job restored paused has no run yet: callers of `output` wait in the attempt that `start()`
  /// then launches, and get the output of the resumed work.
  @Test func callersOfARestoredJobWaitForTheRunThatStartLaunches() throws {
    let executor = ManualTaskExecutor()
    let original = Job(CountingWork(units: 4))
    let restored = try Job<CountingWork>.fromJSON(original.toJSON())
    let outputs = Recorder<Int>()
    executor.spawn { if let output = try? await restored.output { outputs.append(output) } }
    executor.runInOrder()
    #expect(restored.waiterCountForTesting == 1)
    #expect(restored.status == .notStarted)
    executor.spawn { restored.start() }
    executor.runInOrder()
    #expect(outputs.values == [CountingWork(units: 4).expectedOutput])
  }
}

/// Work whose three child tasks each await their hook (`JobHooks`, unit = the child's index), then
/// pass one pause point.
struct ParkingChildren: JobWork {
  static let kind = "test.parking-children"
  var id = UUID().uuidString
  func run(in context: JobContext<Int>) async throws -> Int {
    try await withThrowingTaskGroup(of: Int.self) { group in
      for child in 0..<3 {
        group.addTask {
          try await JobHooks.before(id, unit: child)
          try await context.pausePoint()
          return 1
        }
      }
      return try await group.reduce(0, +)
    }
  }
}
