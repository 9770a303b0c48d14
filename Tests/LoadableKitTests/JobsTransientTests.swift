import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: transient errors", .timeLimit(.minutes(1)))
struct JobsTransientTests {
  let clock = TestClock()

  func options(
    backoff: JobOptions.Backoff = .exponential(initial: .seconds(60), maximum: .seconds(600)),
    window: Duration = .seconds(600)
  ) -> JobOptions {
    JobOptions(isTransient: { $0 is JobTransientError }, backoff: backoff, transientWindow: window, clock: clock)
  }

  /// Lets the job's retries happen at the expected instants (minutes since the start), checking
  /// each deadline before moving the clock to it.
  func expectRetries(atMinutes minutes: [Int], sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for minute in minutes {
      try await clock.waitForSleepers(1)
      let deadline = TestClock.Instant(offset: .seconds(60 * minute))
      #expect(clock.pendingDeadlines == [deadline], sourceLocation: sourceLocation)
      await clock.advance(to: deadline)
    }
  }

  @Test func recoversInsideTheWindow() async throws {
    let fail: [ScriptedWork.Action] = [.fail(transient: true)]
    let work = ScriptedWork(runs: [fail, fail, fail, [.post("connected", .info)]], output: "synced")
    let job = Job(work, options: options())
    job.start()
    try await expectRetries(atMinutes: [1, 3, 7])  // 1, 2, 4 minutes of backoff
    #expect(try await job.output == "synced")
    #expect(job.status == .succeeded)
    #expect(JobLedger[work.id].runs == 4)
    let warnings = job.messages.filter { $0.severity == .warning }
    #expect(warnings.count == 3)
    #expect(warnings.allSatisfy { $0.source == "LoadableKit" })
    #expect(job.messages.last?.text == "connected")
  }

  @Test func failsWithConnectionLostAfterTheWindow() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)]])
    let job = Job(work, options: options())
    let statuses = job.statusUpdates
    job.start()
    // Backoff 1, 2, 4 minutes; the fourth wait is cut to the 3 minutes left in the window, and
    // the error at minute 10 gives up.
    try await expectRetries(atMinutes: [1, 3, 7, 10])
    await #expect(throws: JobError.connectionLost) { try await job.output }
    #expect(job.status == .failed)
    let error = try #require(job.error as? JobError)
    #expect(error == .connectionLost)
    #expect(error.message.contains("connection was lost"))
    #expect(error.underlyingError as? JobTransientError == JobTransientError(run: 5))
    let last = try #require(job.messages.last)
    #expect(last.severity == .error)
    #expect(last.text.contains("connection was lost"))
    #expect(JobLedger[work.id].runs == 5)
    #expect(clock.sleeperCount == 0)
    #expect(await statuses.collect() == [.notStarted, .started, .failed], "retries do not change the status")
  }

  @Test func aNewCheckpointRestartsTheWindow() async throws {
    let fail: [ScriptedWork.Action] = [.fail(transient: true)]
    let progressThenFail: [ScriptedWork.Action] = [.checkpoint(1), .fail(transient: true)]
    let work = ScriptedWork(runs: [fail, fail, fail, progressThenFail, fail, fail, []])
    let job = Job(work, options: options())
    job.start()
    // Errors at 0, 1, 3; at 7 a checkpoint was saved, so the window and the backoff start over:
    // 8, 10, then 14. Without the restart the error at 10 would have given up.
    try await expectRetries(atMinutes: [1, 3, 7, 8, 10, 14])
    #expect(try await job.output == "done")
    #expect(job.checkpoint == 1)
    #expect(JobLedger[work.id].runs == 7)
  }

  @Test func aRetryResumesFromTheLastCheckpoint() async throws {
    let work = CountingWork(units: 5)
    let failedOnce = JobLatch()
    let flaky = FlakyOnce()
    JobHooks.set(work.id) { unit in
      if unit == 3, flaky.fire() {
        failedOnce.open()
        throw JobTransientError(run: 1)
      }
    }
    let job = Job(work, options: options(backoff: .constant(.seconds(30))))
    job.start()
    await failedOnce.wait()
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(30))
    #expect(try await job.output == work.expectedOutput)
    let ledger = JobLedger[work.id]
    #expect(ledger.started == [0, 1, 2, 3, 3, 4], "only the failed unit ran again")
    #expect(ledger.runs == 2)
  }

  @Test func aNonTransientErrorFailsAtOnce() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: false)]])
    let job = Job(work, options: options())
    job.start()
    await #expect(throws: JobTestFailure(reason: "run 1")) { try await job.output }
    #expect(clock.sleeperCount == 0)
    #expect(JobLedger[work.id].runs == 1)
  }

  @Test func aZeroWindowNeverRetries() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)]])
    let job = Job(work, options: options(window: .zero))
    job.start()
    await #expect(throws: JobError.connectionLost) { try await job.output }
    #expect(JobLedger[work.id].runs == 1)
  }

  @Test func cancelDuringTheBackoffStopsTheRetries() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)]])
    let job = Job(work, options: options())
    job.start()
    try await clock.waitForSleepers(1)
    #expect(await job.cancel())
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    #expect(clock.sleeperCount == 0)
    #expect(JobLedger[work.id].runs == 1)
  }

  @Test func pauseDuringTheBackoffHoldsTheNextRun() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)], [.post("second run", .info)]])
    let job = Job(work, options: options())
    job.start()
    try await clock.waitForSleepers(1)
    #expect(job.pause())
    await job.waitUntilParked()  // waiting out a backoff counts as parked
    let saved = try job.toJSON()
    await clock.advance(by: .seconds(60))
    await job.waitUntilParked()
    #expect(job.status == .paused)
    #expect(JobLedger[work.id].runs == 1, "a paused job does not run again after the backoff")
    #expect(job.start())
    #expect(try await job.output == "done")
    #expect(JobLedger[work.id].runs == 2)
    #expect(try Job<ScriptedWork>.fromJSON(saved).status == .paused)
  }

  @Test func cancellationErrorsAreNeverRetried() async throws {
    struct ThrowsCancellation: JobWork {
      static let kind = "test.throws-cancellation"
      func run(in context: JobContext<Int>) async throws -> Int { throw CancellationError() }
    }
    let job = Job(ThrowsCancellation(), options: JobOptions(isTransient: { _ in true }, clock: clock))
    job.start()
    await #expect(throws: CancellationError.self) { try await job.output }
    #expect(clock.sleeperCount == 0)
  }

  /// A job paused during a backoff for longer than the window: time paused is not time failing,
  /// so the resume opens the window anew and the next error is retried — it failed the job at once
  /// with `connectionLost`, "the work kept failing for 600.0 seconds" (found by a second review,
  /// helper 36). The same job saved and restored while paused already got a fresh window.
  @Test func aPauseDuringABackoffDoesNotUseUpTheWindow() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)], [.fail(transient: true)], []])
    let job = Job(work, options: options())
    job.start()
    try await clock.waitForSleepers(1)  // the first error's backoff: a minute
    job.pause()
    await clock.advance(by: .seconds(3600))  // the user keeps it paused for an hour
    await job.waitUntilParked()
    job.start()
    // The second run fails at minute 60: a retry a minute later, in a window opened by that error.
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(3600 + 60))])
    await clock.advance(by: .seconds(60))
    #expect(try await job.output == "done")
    #expect(JobLedger[work.id].runs == 3)
  }

  /// The same for a pause inside a run, at the work's pause point, after the window opened: the
  /// error after the resume is retried.
  @Test func aPauseInsideARunDoesNotUseUpTheWindow() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: true)], [.hook, .pausePoint, .fail(transient: true)], []])
    let arrived = JobLatch()
    let release = JobLatch()
    JobHooks.set(work.id) { _ in
      arrived.open()
      await release.wait()
    }
    let job = Job(work, options: options())
    job.start()
    try await clock.waitForSleepers(1)
    await clock.advance(by: .seconds(60))  // the second run starts, and waits in its hook
    await arrived.wait()
    job.pause()
    release.open()
    await job.waitUntilParked()  // at the run's pause point
    await clock.advance(by: .seconds(3600))
    job.start()  // the run goes on and fails at minute 61
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(3660 + 60))])
    await clock.advance(by: .seconds(60))
    #expect(try await job.output == "done")
    #expect(JobLedger[work.id].runs == 3)
  }

  @Test func backoffDelays() {
    let exponential = JobOptions.Backoff.exponential()
    #expect((1...8).map(exponential.delay(forAttempt:)) == [1, 2, 4, 8, 16, 32, 60, 60].map { .seconds($0) })
    #expect(exponential.delay(forAttempt: 10_000) == .seconds(60))
    #expect(exponential.delay(forAttempt: .max) == .seconds(60))
    #expect(exponential.delay(forAttempt: 0) == .seconds(1))
    #expect(exponential.delay(forAttempt: -5) == .seconds(1))
    #expect(JobOptions.Backoff.constant(.seconds(3)).delay(forAttempt: 50) == .seconds(3))
    #expect(JobOptions.Backoff.constant(.zero).delay(forAttempt: 3) == .zero)
    let odd = JobOptions.Backoff(initial: .seconds(-1), multiplier: .nan, maximum: .seconds(-10))
    #expect(odd.delay(forAttempt: 3) == .zero)
    let shrinking = JobOptions.Backoff(initial: .seconds(8), multiplier: 0.5, maximum: .seconds(60))
    #expect((1...3).map(shrinking.delay(forAttempt:)) == [8, 4, 2].map { .seconds($0) })
    let defaults = JobOptions()
    #expect(defaults.transientWindow == .seconds(600))
    #expect(defaults.isTransient(JobTransientError(run: 1)) == false)
  }
}

/// True the first time only.
final class FlakyOnce: Sendable {
  private let count = Counter()
  func fire() -> Bool { count.increment() == 1 }
}
