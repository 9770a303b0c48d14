import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: cancel", .timeLimit(.minutes(1)))
struct JobsCancelTests {
  @Test func cancelBeforeStartFailsTheJobAndNothingRuns() async throws {
    let work = CountingWork(units: 3)
    let job = Job(work)
    #expect(await job.cancel())
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    await #expect(throws: CancellationError.self) { try await job.output }
    #expect(job.start() == false, "a cancelled job never runs")
    #expect(JobLedger[work.id].runs == 0)
  }

  @Test func cancelWhileRunningStopsCooperativeWork() async throws {
    let work = CountingWork(units: 5)
    let clock = TestClock()
    JobHooks.set(work.id, holdJobAt(2, on: clock))
    let job = Job(work)
    job.start()
    try await clock.waitForSleepers(1)  // inside unit 2
    #expect(await job.cancel())
    // cancel() returned only after the work stopped: its state is final now.
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    #expect(clock.sleeperCount == 0)
    #expect(JobLedger[work.id].finished == [0, 1], "unit 2 was interrupted")
    await #expect(throws: CancellationError.self) { try await job.output }
    #expect(job.checkpoint?.next == 2)
  }

  @Test func cancelWhilePausedWakesTheParkedWorkWithCancellationError() async throws {
    let (job, work, release) = await startJob(units: 5, heldAt: 1)
    job.pause()
    release.open()
    await job.waitUntilParked()
    #expect(await job.cancel())
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    #expect(JobLedger[work.id].finished == [0, 1], "no unit ran after the pause")
    #expect(job.start() == false)
  }

  @Test func cancelARestoredPausedJobEndsItAtOnce() async throws {
    let work = CountingWork(units: 5)
    let clock = TestClock()
    JobHooks.set(work.id, holdJobAt(2, on: clock))
    let original = Job(work)
    original.start()
    try await clock.waitForSleepers(1)
    let data = try original.toJSON()
    await original.cancel()
    let restored = try Job<CountingWork>.fromJSON(data)
    #expect(restored.status == .paused)
    #expect(await restored.cancel())
    #expect(restored.status == .failed)
    #expect(restored.error is CancellationError)
    #expect(JobLedger[work.id].runs == 1, "the restored job never ran")
  }

  @Test func cancelTwiceCancelsOnceAndBothWaitForTheWork() async throws {
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let first = Task { await job.cancel() }
    await job.waitFor(.canceling)
    let second = Task {
      let cancelled = await job.cancel()
      return (cancelled, job.status)  // read when this call returned
    }
    release.open()
    #expect(await first.value == true)
    let (cancelled, statusAfterSecond) = await second.value
    #expect(cancelled == false, "the second cancel found the job already canceling")
    #expect(statusAfterSecond == .failed, "the second cancel also waited for the work to stop")
    #expect(await job.cancel() == false, "a third cancel after the end does nothing")
  }

  @Test func cancelOfWorkThatIgnoresCancellationEndsFailedAndDropsTheResult() async throws {
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let cancel = Task { await job.cancel() }
    await job.waitFor(.canceling)
    #expect(job.status == .canceling, "cancel waits while the work ignores it")
    release.open()  // the work finishes unit 1 and meets a pause point, which throws
    #expect(await cancel.value)
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    await #expect(throws: CancellationError.self) { try await job.output }
  }

  @Test func cancelOfWorkThatNeverChecksDropsItsOutput() async throws {
    let work = ScriptedWork(runs: [[.hook, .report(completed: 1, total: 2)]], output: "finished anyway")
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 0)
    let cancel = Task { await job.cancel() }
    await job.waitFor(.canceling)
    release.open()  // the work returns "finished anyway" without ever seeing the cancellation
    #expect(await cancel.value)
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    await #expect(throws: CancellationError.self) { try await job.output }
    #expect(job.fractionCompleted < 1, "a dropped result does not complete the progress")
  }

  @Test func cancellingTheTaskThatCallsCancelStopsOnlyTheWait() async throws {
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let caller = Task { await job.cancel() }
    await job.waitFor(.canceling)
    caller.cancel()
    #expect(await caller.value == true, "the call returns early but still cancelled the job")
    #expect(job.status == .canceling)
    release.open()
    await #expect(throws: CancellationError.self) { try await job.output }
    #expect(job.status == .failed)
  }
}
