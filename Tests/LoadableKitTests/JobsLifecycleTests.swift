import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: lifecycle", .timeLimit(.minutes(1)))
struct JobsLifecycleTests {
  @Test func aNewJobHasNotStarted() {
    let job = Job(CountingWork(units: 3))
    #expect(job.status == .notStarted)
    #expect(job.fractionCompleted == 0)
    #expect(job.messages.isEmpty)
    #expect(job.error == nil)
    #expect(job.checkpoint == nil)
    #expect(job.pause() == false, "a job that is not running cannot pause")
    #expect(job.status == .notStarted)
    #expect(JobLedger[job.work.id].runs == 0, "creating a job runs nothing")
  }

  @Test func runsToSuccessAndNeverRunsAgain() async throws {
    let work = CountingWork(units: 5)
    let job = Job(work)
    #expect(job.start())
    #expect(job.start() == false, "start while running (or after finishing) returns false")
    let output = try await job.output
    #expect(output == work.expectedOutput)
    #expect(job.status == .succeeded)
    #expect(job.fractionCompleted == 1)
    #expect(job.error == nil)
    #expect(job.messages.map(\.text) == ["counted 5 units"])
    #expect(job.checkpoint == CountingWork.Progress(next: 5, sum: work.expectedOutput))
    // A finished job never runs again.
    #expect(job.start() == false)
    #expect(job.pause() == false)
    #expect(await job.cancel() == false)
    #expect(job.status == .succeeded)
    #expect(try await job.output == work.expectedOutput, "the output stays available")
    #expect(JobLedger[work.id].runs == 1)
    #expect(JobLedger[work.id].finished == [0, 1, 2, 3, 4])
  }

  @Test func aFailedJobKeepsItsErrorAndNeverRunsAgain() async throws {
    let work = ScriptedWork(runs: [[.post("trying", .info), .fail(transient: false)]])
    let job = Job(work)
    job.start()
    await #expect(throws: JobTestFailure(reason: "run 1")) { try await job.output }
    #expect(job.status == .failed)
    #expect(job.error as? JobTestFailure == JobTestFailure(reason: "run 1"))
    #expect(job.start() == false)
    #expect(job.pause() == false)
    #expect(await job.cancel() == false)
    #expect(job.status == .failed)
    #expect(JobLedger[work.id].runs == 1, "a failed job is not retried unless the error is transient")
  }

  @Test func pauseParksTheWorkAtItsNextPausePointAndStartResumesIt() async throws {
    let work = CountingWork(units: 6)
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 2)  // the work is inside unit 2
    #expect(job.pause())
    #expect(job.status == .paused, "pause() sets .paused at once")
    #expect(job.pause() == false, "pausing a paused job returns false")
    release.open()
    await job.waitUntilParked()
    // Unit 2 was finished and checkpointed; the work stopped at the pause point before unit 3.
    #expect(job.checkpoint?.next == 3)
    #expect(JobLedger[work.id].started == [0, 1, 2])
    #expect(job.status == .paused)
    // Held again before unit 4, so the resumed work cannot finish before the status is read.
    let releaseAt4 = JobLatch()
    JobHooks.set(work.id, latchJobAt(4, arrived: JobLatch(), release: releaseAt4))
    #expect(job.start(), "start resumes a paused job")
    #expect(job.status == .started)
    releaseAt4.open()
    #expect(try await job.output == work.expectedOutput)
    #expect(JobLedger[work.id].finished == [0, 1, 2, 3, 4, 5])
    #expect(JobLedger[work.id].runs == 1, "resuming a parked job continues the same run")
  }

  /// The job's work runs on an executor that runs nothing until told, so the pause lands before
  /// the work runs at all, whatever the threads do. (Started on the shared pool, the work could
  /// finish its three units before `pause()` was called: seen once, under ThreadSanitizer on a busy
  /// machine, `succeeded` where `paused` was expected.)
  @Test func pauseBeforeTheWorkRunsParksItBeforeTheFirstUnit() async throws {
    let executor = ManualTaskExecutor()
    let work = CountingWork(units: 3)
    let job = Job(work)
    executor.spawn {
      job.start()
      job.pause()
    }
    executor.runInOrder()  // start, pause, then the work: it parks at its first pause point
    await job.waitUntilParked()
    #expect(job.status == .paused)
    #expect(JobLedger[work.id].started.isEmpty, "parked before the first unit")
    executor.spawn { job.start() }
    executor.runInOrder()
    #expect(JobLedger[work.id].finished == [0, 1, 2])
    #expect(try await job.output == work.expectedOutput)
  }

  @Test func waitUntilParkedReturnsAtOnceWhenNotPaused() async throws {
    let job = Job(CountingWork(units: 1))
    await job.waitUntilParked()  // not started
    job.start()
    _ = try await job.output
    await job.waitUntilParked()  // finished
    #expect(job.status == .succeeded)
  }

  @Test func startAndPauseWhileCancelingReturnFalse() async throws {
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let cancel = Task { await job.cancel() }
    await job.waitFor(.canceling)
    #expect(job.start() == false)
    #expect(job.pause() == false)
    #expect(job.status == .canceling)
    release.open()
    #expect(await cancel.value)
    #expect(job.status == .failed)
  }

  /// The exact status sequences observers see, one scenario per row.
  @Test(arguments: ["success", "pause-resume", "cancel-not-started", "cancel-running", "cancel-paused", "failure"])
  func statusSequences(scenario: String) async throws {
    let work = CountingWork(units: 3)
    let clock = TestClock()
    let job = Job(work)
    let updates = job.statusUpdates  // subscribes now: the snapshot is .notStarted
    let recorder = Task { await updates.collect() }
    let expected: [JobStatus]
    switch scenario {
    case "success":
      job.start()
      _ = try await job.output
      expected = [.notStarted, .started, .succeeded]
    case "pause-resume":
      let arrived = JobLatch()
      let release = JobLatch()
      JobHooks.set(work.id, latchJobAt(1, arrived: arrived, release: release))
      job.start()
      await arrived.wait()
      job.pause()
      release.open()
      await job.waitUntilParked()
      job.start()
      _ = try await job.output
      expected = [.notStarted, .started, .paused, .started, .succeeded]
    case "cancel-not-started":
      #expect(await job.cancel())
      expected = [.notStarted, .failed]
    case "cancel-running":
      JobHooks.set(work.id, holdJobAt(1, on: clock))
      job.start()
      try await clock.waitForSleepers(1)
      #expect(await job.cancel())
      expected = [.notStarted, .started, .canceling, .failed]
    case "cancel-paused":
      let arrived = JobLatch()
      let release = JobLatch()
      JobHooks.set(work.id, latchJobAt(1, arrived: arrived, release: release))
      job.start()
      await arrived.wait()
      job.pause()
      release.open()
      await job.waitUntilParked()
      #expect(await job.cancel())
      expected = [.notStarted, .started, .paused, .canceling, .failed]
    default:
      JobHooks.set(work.id) { _ in throw JobTestFailure(reason: "boom") }
      job.start()
      _ = try? await job.output
      expected = [.notStarted, .started, .failed]
    }
    #expect(await recorder.value == expected)
  }
}

@Suite("Jobs: output", .timeLimit(.minutes(1)))
struct JobsOutputTests {
  @Test func awaitingTheOutputDoesNotStartTheJob() async throws {
    let work = CountingWork(units: 2)
    let job = Job(work)
    let awaiter = Task { try await job.output }
    // The awaiter cannot end before it has called `output`; if `output` started the job, the
    // job would be running by then.
    awaiter.cancel()
    await #expect(throws: CancellationError.self) { try await awaiter.value }
    #expect(job.status == .notStarted)
    #expect(JobLedger[work.id].runs == 0)
    #expect(job.start(), "the job had not been started")
    #expect(try await job.output == work.expectedOutput)
  }

  @Test func cancellingTheAwaitingTaskThrowsCancellationErrorAndLeavesTheJobAlone() async throws {
    let work = CountingWork(units: 3)
    let clock = TestClock()
    JobHooks.set(work.id, holdJobAt(1, on: clock))
    let job = Job(work)
    job.start()
    try await clock.waitForSleepers(1)  // the job is running and cannot finish
    let awaiters = (0..<5).map { _ in Task { try await job.output } }
    for awaiter in awaiters { awaiter.cancel() }
    for awaiter in awaiters {
      await #expect(throws: CancellationError.self) { try await awaiter.value }
    }
    #expect(job.status == .started, "cancelling a waiter does not cancel the job")
    #expect(await job.cancel())
  }

  @Test func everyAwaiterGetsTheOutput() async throws {
    let work = CountingWork(units: 3)
    let arrived = JobLatch()
    let release = JobLatch()
    JobHooks.set(work.id, latchJobAt(0, arrived: arrived, release: release))
    let job = Job(work)
    job.start()
    let awaiters = (0..<20).map { _ in Task { try await job.output } }
    await arrived.wait()
    release.open()
    for awaiter in awaiters { #expect(try await awaiter.value == work.expectedOutput) }
  }
}
