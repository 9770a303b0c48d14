import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("Server-side jobs", .timeLimit(.minutes(1)))
struct ServerJobRunnerTests {
  let clock = TestClock()

  /// A job of `RemoteWork` whose runner talks to a new fake server, polling on the test clock
  /// with the schedule 1 s, 2 s, 4 s, 8 s, 8 s …
  func makeJob(options: JobOptions? = nil) -> (job: Job<RemoteWork>, server: FakeJobServer) {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    return (Job(work, options: options ?? JobOptions(clock: clock)), server)
  }

  /// Waits until the job sleeps on the clock, checks that it sleeps until `seconds`, and moves
  /// the clock there.
  func expectSleep(until seconds: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    try await clock.waitForSleepers(1)
    let deadline = TestClock.Instant(offset: .seconds(seconds))
    #expect(clock.pendingDeadlines == [deadline], sourceLocation: sourceLocation)
    await clock.advance(to: deadline)
  }

  @Test func pollsWithDecreasingFrequencyAfterSavingTheServerJobID() async throws {
    let (job, server) = makeJob()
    job.start()
    try await clock.waitForSleepers(1)
    #expect(job.checkpoint == ServerJobCheckpoint(serverJobID: "job-1"), "saved before the first poll")
    #expect(server.log == ["submit area 51"])
    server.update { $0.state = .executing }
    // 1, 2, 4, 8 s, then capped at 8 s.
    for (poll, second) in [1, 3, 7, 15, 23, 31].enumerated() {
      server.update { $0.progress = Double(poll) / 10 }
      try await expectSleep(until: second)
      try await clock.waitForSleepers(1)
      #expect(server.requests("status") == poll + 1)
      #expect(job.fractionCompleted == Double(poll) / 10, "the server's progress is the job's")
    }
    server.update { $0.state = .succeeded }
    try await expectSleep(until: 39)
    #expect(try await job.output == "result of job-1")
    #expect(server.requests("submit") == 1)
    #expect(server.requests("result") == 1)
    #expect(server.log.last == "result job-1")
    #expect(job.fractionCompleted == 1)
  }

  @Test func aJobManagerStoresTheServerJobIDBeforeTheFirstPoll() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let store = ServerJobTestStore()
    let manager = try JobManager(registry: registry, store: store, clock: clock)
    let job = Job(work, options: JobOptions(clock: clock))
    let id = try manager.add(job).id
    job.start()
    try await clock.waitForSleepers(1)
    #expect(server.log == ["submit area 51"])
    let stored = try #require(store.records[id])
    let restored = try Job<RemoteWork>.fromJSON(stored, options: JobOptions(clock: clock))
    #expect(restored.serverJobID == "job-1", "stored before the first poll")
    await job.cancel()
  }

  /// Issue 29: the checkpoint that counts the server's messages is stored at once, and the
  /// messages must be in that write, not in the throttled save a second later: a process killed
  /// in between would restore a job that counts the messages as seen but does not hold them.
  @Test func theStoredRecordHoldsEveryServerMessageItsCheckpointCounts() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let store = ServerJobTestStore()
    // The throttled saves wait on a clock of their own that never moves: only the saves made at
    // once reach the store, as when the process is killed before the throttled one.
    let saveClock = TestClock()
    let manager = try JobManager(registry: registry, store: store, clock: saveClock)
    let job = Job(work, options: JobOptions(clock: clock))
    let id = try manager.add(job).id
    server.update {
      $0.post("Packaging the basemap")
      $0.post("Packaging 3 layers")
    }
    job.start()
    try await expectSleep(until: 1)  // the poll brings two messages
    try await clock.waitForSleepers(1)
    server.update { $0.post("Layer 1 of 3 packaged") }
    try await expectSleep(until: 3)  // and one more
    try await clock.waitForSleepers(1)
    let restored = try Job<RemoteWork>.fromJSON(try #require(store.records[id]), options: JobOptions(clock: clock))
    #expect(restored.checkpoint?.messagesSeen == 3)
    #expect(restored.serverMessages == ["Packaging the basemap", "Packaging 3 layers", "Layer 1 of 3 packaged"])
    await job.cancel()
    _ = manager
  }

  /// Issue 29: `pauseAll()` as the app goes to the background returns while a server job waits
  /// for its next poll: its checkpoint is stored, and nothing needs to finish. It used to wait
  /// out the delay (2 s here; up to the schedule's cap).
  @Test func pauseAllDoesNotWaitOutAServerJobsPollDelay() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let store = ServerJobTestStore()
    let manager = try JobManager(registry: registry, store: store, clock: TestClock())
    let job = Job(work, options: JobOptions(clock: clock))
    let id = try manager.add(job).id
    server.update {
      $0.state = .executing
      $0.post("Packaging the basemap")
    }
    job.start()
    try await expectSleep(until: 1)  // the first poll; the next is due at 3
    try await clock.waitForSleepers(1)
    try await bounded { await manager.pauseAll() }  // the clock does not move
    #expect(clock.now == TestClock.Instant(offset: .seconds(1)))
    #expect(job.status == .paused)
    let restored = try Job<RemoteWork>.fromJSON(try #require(store.records[id]), options: JobOptions(clock: clock))
    #expect(restored.status == .paused)
    #expect(restored.checkpoint == job.checkpoint)
    #expect(restored.serverMessages == ["Packaging the basemap"])
    // The wait then ends, and the paused job parks without polling.
    await clock.advance(to: TestClock.Instant(offset: .seconds(3)))
    #expect(server.requests("status") == 1)
    await job.cancel()
    #expect(server.requests("status") == 1)
  }

  /// Issue 29: a job resumed while it waits for its next poll polls at once, and its schedule
  /// starts over (pause and start at t=2 while waiting for the t=3 poll: a poll at 2, then 1 s).
  @Test func aResumeDuringAPollWaitPollsAtOnceAndStartsTheScheduleOver() async throws {
    let (job, server) = makeJob()
    job.start()
    server.update { $0.state = .executing }
    try await expectSleep(until: 1)  // the first poll; the next is due at 3
    try await clock.waitForSleepers(1)
    await clock.advance(to: TestClock.Instant(offset: .seconds(2)))
    job.pause()
    await job.waitUntilParked()  // the wait counts as parked
    job.start()
    try await bounded { await server.statusRequest(2).wait() }  // at 2, not at 3
    #expect(clock.now == TestClock.Instant(offset: .seconds(2)))
    try await expectSleep(until: 3)  // the first delay again: 1 s
    try await clock.waitForSleepers(1)
    #expect(server.requests("status") == 3)
    #expect(clock.pendingDeadlines == [TestClock.Instant(offset: .seconds(5))], "then 2 s")
    await job.cancel()
  }

  /// Issue 29: `checkServerJobs()` asks the server once about each stored server job, without
  /// resuming its work: new status, messages and progress are recorded and stored; a job that
  /// finished meanwhile fetches only its result at the next start.
  @Test func checkServerJobsAsksOnceWithoutResumingTheWork() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    registry.register(CountingWork.self)
    let store = ServerJobTestStore()
    let id: String
    let job = Job(work, options: JobOptions(clock: clock))
    do {  // the first launch: submitted, polled once, paused as the app quits
      let manager = try JobManager(registry: registry, store: store, clock: TestClock())
      id = try manager.add(job).id
      try manager.add(Job(CountingWork(units: 2)))  // not a server job: not checked
      server.update { $0.state = .executing }
      job.start()
      try await expectSleep(until: 1)
      try await clock.waitForSleepers(1)
      await manager.pauseAll()
    }
    // Meanwhile the server finished the job.
    server.update {
      $0.post("Packaging 3 layers")
      $0.progress = 0.9
      $0.state = .succeeded
    }
    let manager = try JobManager(registry: registry, store: store, clock: TestClock())
    let restored = try #require(manager.job(id: id, as: RemoteWork.self))
    let checks = try await bounded { await manager.checkServerJobs() }
    #expect(checks.map(\.id) == [id])
    #expect(try checks.first?.result.get().state == .succeeded)
    #expect(server.requests("status") == 2, "one status request")
    #expect(server.requests("result") == 0, "the work did not run")
    #expect(restored.status == .paused)
    #expect(restored.checkpoint?.lastState == .succeeded, "marked finished")
    #expect(restored.serverMessages == ["Packaging 3 layers"])
    #expect(restored.fractionCompleted == 0.9)
    let stored = try Job<RemoteWork>.fromJSON(try #require(store.records[id]), options: JobOptions(clock: clock))
    #expect(stored.checkpoint?.lastState == .succeeded, "and stored")
    #expect(stored.serverMessages == ["Packaging 3 layers"])
    // A second check of a job that finished on the server asks nothing.
    _ = await manager.checkServerJobs()
    #expect(server.requests("status") == 2)
    // The next start fetches the result once, and no message twice.
    manager.resumeAll()
    #expect(try await restored.output == "result of job-1")
    #expect(server.requests("result") == 1)
    #expect(server.requests("status") == 2, "the result only: the check found the job succeeded")
    #expect(server.requests("submit") == 1)
    #expect(restored.serverMessages == ["Packaging 3 layers"])
    await job.cancel()  // the first launch's job, still waiting for its next poll
  }

  /// A `RemoteWork` job on a new fake server, held by a new manager as "map".
  func managedRemoteJob() throws -> (job: Job<RemoteWork>, server: FakeJobServer, manager: JobManager) {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let manager = try JobManager(registry: registry, store: ServerJobTestStore(), clock: TestClock())
    let job = Job(work, options: JobOptions(clock: clock))
    try manager.add(job, id: "map")
    return (job, server, manager)
  }

  /// A managed job whose server job executes, paused by `pauseAll()` while its work waits for its
  /// t=3 poll.
  func pausedWaitingForItsPoll() async throws -> (job: Job<RemoteWork>, server: FakeJobServer, manager: JobManager) {
    let (job, server, manager) = try managedRemoteJob()
    server.update { $0.state = .executing }
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    await manager.pauseAll()
    return (job, server, manager)
  }

  /// A job paused in this process (its work waiting for its next poll) is checked too, and its
  /// work goes on from what the check recorded: no server message twice.
  @Test func aCheckOfAPausedJobInThisProcessIsWhereItsWorkGoesOnFrom() async throws {
    let (job, server, manager) = try await pausedWaitingForItsPoll()
    server.update { $0.post("Packaging 3 layers") }
    let checks = try await bounded { await manager.checkServerJobs() }
    #expect(checks.map(\.id) == ["map"])
    #expect(job.checkpoint?.messagesSeen == 1)
    job.start()  // polls at once, from the checkpoint the check saved
    try await bounded { await server.statusRequest(3).wait() }
    try await clock.waitForSleepers(1)
    #expect(server.log.last == "status job-1 after 1")
    #expect(job.serverMessages == ["Packaging 3 layers"])
    await job.cancel()
  }

  /// A job paused while its work still runs (here, inside a poll) is not checked: the work may
  /// save a newer checkpoint at any moment, so a check asks nothing and records nothing, and the
  /// work parks at its next pause point.
  @Test func aCheckLeavesAloneAJobWhoseWorkStillRuns() async throws {
    let (job, server, manager) = try managedRemoteJob()
    let poll = JobLatch()
    server.update {
      $0.state = .executing
      $0.statusGates[1] = poll
    }
    job.start()
    try await expectSleep(until: 1)
    try await bounded { await server.statusRequest(1).wait() }  // the first poll, held by the server
    job.pause()
    #expect(job.checkpoint?.serverJobID == "job-1", "a checkpoint the check could have read")
    let checks = try await bounded { await manager.checkServerJobs() }
    #expect(checks.isEmpty, "the work runs: nothing checked")
    #expect(server.requests("status") == 1, "the check asked nothing")
    poll.open()
    try await bounded { await job.waitUntilParked() }
    #expect(job.status == .paused)
    #expect(server.requests("status") == 1)
    await job.cancel()
  }

  /// A check whose task is cancelled (a background task's deadline) records nothing.
  @Test func aCancelledCheckRecordsNothing() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let store = ServerJobTestStore()
    let saved = Job(work, options: JobOptions(clock: clock))
    server.update { $0.state = .executing }
    saved.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    saved.pause()
    await saved.waitUntilParked()
    try store.save(saved.toJSON(), id: "map")
    let manager = try JobManager(registry: registry, store: store, clock: TestClock())
    let restored = try #require(manager.job(id: "map", as: RemoteWork.self))
    server.update { $0.post("Packaging 3 layers") }
    // Cancelled before the check begins, whenever the task runs (a `cancel()` from here could
    // come after a check that the other core already finished).
    let checking = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await manager.checkServerJobs()
    }
    let checks = try await bounded { await checking.value }
    #expect(restored.serverMessages.isEmpty)
    #expect(restored.checkpoint?.messagesSeen == 0)
    #expect(checks.allSatisfy { (try? $0.result.get()) == nil })
    await saved.cancel()
  }

  @Test func postsEachServerMessageOnceAcrossPolls() async throws {
    let (job, server) = makeJob()
    server.update {
      $0.sendsAllMessages = true  // ignores messagesAfter: the runner must de-duplicate
      $0.post("Packaging the basemap")
      $0.post("Packaging 3 layers")
    }
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    server.update { $0.post("Layer 1 of 3 packaged", severity: .warning) }
    try await expectSleep(until: 3)
    try await clock.waitForSleepers(1)
    try await expectSleep(until: 7)  // nothing new
    try await clock.waitForSleepers(1)
    server.update { $0.state = .succeeded }
    try await expectSleep(until: 15)
    _ = try await job.output
    #expect(job.serverMessages == ["Packaging the basemap", "Packaging 3 layers", "Layer 1 of 3 packaged"])
    #expect(job.messages.first { $0.text == "Layer 1 of 3 packaged" }?.severity == .warning)
    #expect(
      server.log.filter { $0.hasPrefix("status") } == [
        "status job-1 after 0", "status job-1 after 2", "status job-1 after 3", "status job-1 after 3",
      ])
    #expect(job.checkpoint?.messagesSeen == 3)
  }

  @Test func postsEachServerMessageOnceAcrossARestore() async throws {
    let (job, server) = makeJob()
    server.update {
      $0.sendsAllMessages = true
      $0.post("Packaging the basemap")
      $0.post("Packaging 3 layers")
    }
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)  // polled, and waits for the t=3 poll (not a pause before the poll)
    job.pause()
    try await expectSleep(until: 3)  // the wait in progress ends, then the work parks
    await job.waitUntilParked()
    let saved = try job.toJSON()

    server.update { $0.post("Layer 1 of 3 packaged") }
    let restored = try Job<RemoteWork>.fromJSON(saved, options: JobOptions(clock: clock))
    #expect(restored.serverMessages == ["Packaging the basemap", "Packaging 3 layers"])
    #expect(restored.checkpoint?.messagesSeen == 2)
    restored.start()
    try await clock.waitForSleepers(1)  // polled at once, and waits for the next poll
    #expect(server.log.last == "status job-1 after 2")
    server.update { $0.state = .succeeded }
    try await expectSleep(until: 4)
    #expect(try await restored.output == "result of job-1")
    #expect(restored.serverMessages == ["Packaging the basemap", "Packaging 3 layers", "Layer 1 of 3 packaged"])
    #expect(server.requests("submit") == 1)
    await job.cancel()
  }

  @Test func cancelAsksTheServerAndWaitsForItsAnswer() async throws {
    let (job, server) = makeJob()
    let gate = JobLatch()
    server.update { $0.cancelGate = gate }
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    let returned = Mutex(false)
    let returnedOwner = LockOwner()
    let canceller = Task {
      let cancelled = await job.cancel()
      returned.withLock(owner: returnedOwner) { $0 = true }
      server.cancelArrived.open()  // so that the test does not hang when the server was not asked
      return cancelled
    }
    await server.cancelArrived.wait()
    #expect(server.requests("cancel") == 1)
    #expect(job.status == .canceling, "the job waits for the server's answer")
    #expect(returned.withLock(owner: returnedOwner) { $0 } == false)
    #expect(job.messages.last?.text == "Asking the server to cancel job job-1")
    gate.open()
    #expect(await canceller.value)
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    #expect(server.log == ["submit area 51", "status job-1 after 0", "cancel job-1"])
    #expect(job.serverMessages.last == "Cancelled at the client's request")
    #expect(job.checkpoint?.lastState == .cancelled)
    #expect(job.checkpoint?.cancelError == nil)
  }

  /// Issue 29: a server job restored paused (its work not running) asks the server to cancel.
  @Test func cancellingARestoredServerJobAsksTheServerAndReportsItsAnswer() async throws {
    let (job, server) = makeJob()
    job.start()
    server.update { $0.state = .executing }
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    job.pause()
    try await expectSleep(until: 3)
    await job.waitUntilParked()
    let restored = try Job<RemoteWork>.fromJSON(job.toJSON(), options: JobOptions(clock: clock))
    #expect(restored.status == .paused)
    #expect(await restored.cancel())
    #expect(restored.status == .failed)
    #expect(restored.error is CancellationError)
    #expect(server.requests("cancel") == 1, "the server was asked")
    #expect(server.requests("submit") == 1)
    #expect(restored.checkpoint?.lastState == .cancelled)
    #expect(restored.checkpoint?.cancelError == nil)
    #expect(restored.serverMessages.last == "Cancelled at the client's request")
    await job.cancel()
  }

  /// Issue 29: a server job waiting out a transient-error backoff asks the server to cancel.
  @Test func cancellingAServerJobInBackoffAsksTheServerAndReportsItsAnswer() async throws {
    let options = JobOptions(
      isTransient: { $0 is FakeOutage }, backoff: .constant(.seconds(2)), transientWindow: .seconds(10), clock: clock)
    let (job, server) = makeJob(options: options)
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    server.update { $0.isDown = true }
    try await expectSleep(until: 3)  // the poll fails; the job waits 2 s to retry
    try await clock.waitForSleepers(1)
    server.update {
      $0.isDown = false
      $0.cancellable = false
    }
    #expect(await job.cancel())
    #expect(job.status == .failed)
    #expect(job.error is CancellationError)
    #expect(server.requests("cancel") == 1, "the server was asked")
    #expect(job.checkpoint?.cancelError == .cancelNotSupported, "and its answer reported")
    #expect(job.messages.last?.severity == .error)
  }

  @Test func aServerThatCannotCancelGivesATypedError() async throws {
    let (job, server) = makeJob()
    server.update { $0.cancellable = false }
    job.start()
    try await clock.waitForSleepers(1)
    await job.cancel()
    #expect(job.status == .failed)
    #expect(job.error is CancellationError, "a cancelled job fails with CancellationError")
    let refusal = try #require(job.checkpoint?.cancelError)
    #expect(refusal == .cancelNotSupported)
    let last = try #require(job.messages.last)
    #expect(last.severity == .error)
    #expect(last.text.contains("ServerJobError.cancelNotSupported"))
    #expect(server.requests("cancel") == 1)
  }

  @Test func cancelDuringTheSubmissionCancelsTheSubmittedJob() async throws {
    let (job, server) = makeJob()
    let gate = JobLatch()
    server.update { $0.submitGate = gate }
    job.start()
    await server.submitArrived.wait()
    let canceller = Task { await job.cancel() }
    await job.waitFor(.canceling)
    gate.open()
    _ = await canceller.value
    #expect(job.status == .failed)
    #expect(job.serverJobID == "job-1", "the id of the job the server accepted is saved")
    #expect(server.log == ["submit area 51", "cancel job-1"])
  }

  @Test(arguments: [false, true])
  func aJobPausedWhileTheServerFinishesFetchesTheResultWithoutResubmitting(restored: Bool) async throws {
    let (job, server) = makeJob()
    job.start()
    server.update { $0.state = .executing }
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    job.pause()
    try await expectSleep(until: 3)
    await job.waitUntilParked()
    #expect(server.requests("status") == 1, "a paused job does not poll")

    server.update { $0.state = .succeeded }
    await clock.advance(by: .seconds(3600))
    #expect(server.requests("status") == 1)

    var resumed = job
    if restored { resumed = try Job<RemoteWork>.fromJSON(job.toJSON(), options: JobOptions(clock: clock)) }
    #expect(resumed.start())
    #expect(try await resumed.output == "result of job-1", "polled at once, without waiting on the clock")
    #expect(server.log == ["submit area 51", "status job-1 after 0", "status job-1 after 0", "result job-1"])
    if restored { await job.cancel() }
  }

  @Test func anOutageLongerThanTheWindowFailsWithConnectionLost() async throws {
    let options = JobOptions(
      isTransient: { $0 is FakeOutage }, backoff: .constant(.seconds(2)), transientWindow: .seconds(10), clock: clock)
    let (job, server) = makeJob(options: options)
    job.start()
    server.update { $0.state = .executing }
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    server.update { $0.isDown = true }
    // The poll at 3 s fails and opens the window; each retry polls at once (5, 7, 9, 11 s) and
    // fails again; the error at 13 s, 10 s into the window, gives up.
    for second in [3, 5, 7, 9, 11, 13] { try await expectSleep(until: second) }
    await #expect(throws: JobError.connectionLost) { try await job.output }
    #expect(server.requests("status") == 7)
    #expect(server.requests("submit") == 1, "a retry never submits again")
    #expect(clock.sleeperCount == 0)
  }

  @Test func anOutageInsideTheWindowIsRiddenOut() async throws {
    let options = JobOptions(
      isTransient: { $0 is FakeOutage }, backoff: .constant(.seconds(2)), transientWindow: .seconds(10), clock: clock)
    let (job, server) = makeJob(options: options)
    job.start()
    try await expectSleep(until: 1)
    try await clock.waitForSleepers(1)
    server.update { $0.isDown = true }
    try await expectSleep(until: 3)  // the poll fails; the job retries after 2 s
    try await clock.waitForSleepers(1)
    server.update {
      $0.isDown = false
      $0.state = .succeeded
    }
    try await expectSleep(until: 5)  // the retry polls at once
    #expect(try await job.output == "result of job-1")
    #expect(server.requests("submit") == 1)
    #expect(server.requests("status") == 3)
    #expect(job.messages.contains { $0.source == Job<RemoteWork>.messageSource && $0.severity == .warning })
  }

  @Test func aServerJobThatFailedFailsTheJob() async throws {
    let (job, server) = makeJob()
    server.update {
      $0.post("Cannot package layer 2: too many features", severity: .error)
      $0.state = .failed
    }
    job.start()
    try await expectSleep(until: 1)
    let error = try #require(await #expect(throws: ServerJobError.self) { try await job.output })
    #expect(error == .serverJobFailed)
    #expect(error.message.contains("too many features"))
    #expect(server.requests("result") == 0)
  }

  @Test func absorbingAStatusTakesEachSequenceNumberOnce() {
    var checkpoint = ServerJobCheckpoint(serverJobID: "j", messagesSeen: 2)
    let status = ServerJobStatus(
      state: .executing,
      messages: [3, 1, 4, 3, 2].map { ServerJobMessage(sequence: $0, text: "m\($0)") })
    let (fresh, changed) = checkpoint.absorb(status)
    #expect(fresh.map(\.sequence) == [3, 4])
    #expect(changed)
    #expect(checkpoint.messagesSeen == 4)
    #expect(checkpoint.lastState == .executing)
    #expect(checkpoint.absorb(status) == ([], false))
  }

  /// A managed job paused while its submission was in flight — it parks at the pause point after
  /// the submission — whose server job a status check then found succeeded.
  func pausedAtItsSubmissionAndCheckedSucceeded() async throws -> (job: Job<RemoteWork>, server: FakeJobServer, manager: JobManager) {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    let submission = JobLatch()
    server.update { $0.submitGate = submission }
    FakeJobServers.set(work.id, server: server, clock: clock)
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let manager = try JobManager(registry: registry, store: ServerJobTestStore(), clock: TestClock())
    let job = Job(work, options: JobOptions(clock: clock))
    try manager.add(job, id: "map")
    job.start()
    await server.submitArrived.wait()
    job.pause()  // while the submission is in flight
    submission.open()
    await job.waitUntilParked()  // at the pause point after the submission
    #expect(job.checkpoint?.serverJobID == "job-1")
    server.update { $0.state = .succeeded }
    let checks = try await bounded { await manager.checkServerJobs() }
    #expect(try checks.first?.result.get().state == .succeeded)
    #expect(job.checkpoint?.lastState == .succeeded, "marked finished")
    #expect(server.requests("status") == 1)
    return (job, server, manager)
  }

  /// Jobs.md: "a job whose server job finished meanwhile is marked so
  /// (`ServerJobCheckpoint/lastState`) and its next `Job/start()` fetches only the result, without
  /// asking for the status again" — also a job paused while its submission was in flight: the
  /// runner went on from its own copy of the checkpoint (`submitted`), waited a poll and asked
  /// again. (Found by a second review, helper 36.)
  @Test func aJobPausedAtItsSubmissionFetchesOnlyTheResultAfterACheckFoundItSucceeded() async throws {
    let (job, server, manager) = try await pausedAtItsSubmissionAndCheckedSucceeded()
    // Were the work to wait for a poll on the clock, this ends the wait (and the test fails below).
    let mover = Task {
      try await clock.waitForSleepers(1)
      await clock.advance(by: .seconds(1))
    }
    job.start()
    #expect(try await job.output == "result of job-1")
    mover.cancel()
    #expect(server.requests("status") == 1, "the start fetched only the result: \(server.log)")
    _ = manager
  }

  /// The same job cancelled instead of started: its server job finished, so the runner does not
  /// ask the server to cancel it (Jobs.md: "Cancelled after server job … had succeeded").
  @Test func aJobPausedAtItsSubmissionIsNotCancelledOnTheServerAfterACheckFoundItSucceeded() async throws {
    let (job, server, manager) = try await pausedAtItsSubmissionAndCheckedSucceeded()
    _ = try await bounded { await job.cancel() }
    #expect(server.requests("cancel") == 0, "asked the server to cancel a job that had succeeded: \(server.log)")
    #expect(job.checkpoint?.lastState == .succeeded, "the checkpoint kept what the check found")
    _ = manager
  }
}

// MARK: - Support

/// Work that runs on a `FakeJobServer`, found by the work's id.
struct RemoteWork: ServerJobWork {
  static let kind = "test.remote"
  var id: String
  var request: String

  var runner: ServerJobRunner<FakeJobServer> {
    let (server, clock) = FakeJobServers[id]
    return ServerJobRunner(
      service: server, pollSchedule: .exponential(initial: .seconds(1), maximum: .seconds(8)), clock: clock)
  }

  func run(in context: JobContext<ServerJobCheckpoint>) async throws -> String {
    try await runner.run(submitting: request, in: context)
  }
}

extension Job where Work.Checkpoint == ServerJobCheckpoint {
  /// The texts of the server's messages the job posted.
  var serverMessages: [String] { messages.filter { $0.source == "server" }.map(\.text) }
}

/// The fake servers of the running tests, by work id.
enum FakeJobServers {
  private static let entries = Mutex<[String: (FakeJobServer, TestClock)]>([:])
  private static let owner = JobSentinel()

  static func set(_ id: String, server: FakeJobServer, clock: TestClock) {
    entries.withLock(owner: owner) { $0[id] = (server, clock) }
  }

  static subscript(id: String) -> (FakeJobServer, TestClock) {
    entries.withLock(owner: owner) { $0[id]! }
  }
}

struct FakeOutage: Error {}

/// A job store in memory.
final class ServerJobTestStore: JobStore {
  private let state = Mutex<[String: Data]>([:])

  var records: [String: Data] { state.withLock(owner: self) { $0 } }

  func loadAll() throws -> [JobStoreRecord] {
    records.map { JobStoreRecord(id: $0.key, data: .success($0.value)) }
  }

  func save(_ data: Data, id: String) throws { state.withLock(owner: self) { $0[id] = data } }
  func remove(id: String) throws { state.withLock(owner: self) { _ = $0.removeValue(forKey: id) } }
  func setAside(id: String) throws {}
}

/// A server with one job, `job-1`, whose state the test sets; it logs every request.
final class FakeJobServer: ServerJobService, Sendable {
  struct State: Sendable {
    var state: ServerJobStatus.State = .submitted
    var messages: [ServerJobMessage] = []
    var progress: Double?
    var sendsAllMessages = false
    var isDown = false
    var cancellable = true
    var submitGate: JobLatch?
    var cancelGate: JobLatch?
    var log: [String] = []
    /// Opened when the status request of their number arrives.
    var statusLatches: [Int: JobLatch] = [:]
    /// The status request of their number is answered once they open.
    var statusGates: [Int: JobLatch] = [:]

    mutating func post(_ text: String, severity: JobMessage.Severity = .info) {
      messages.append(ServerJobMessage(sequence: messages.count + 1, text: text, severity: severity))
    }

    var status: ServerJobStatus { ServerJobStatus(state: state, messages: messages, progress: progress) }
  }

  private let state = Mutex(State())
  let submitArrived = JobLatch()
  let cancelArrived = JobLatch()

  func update(_ body: (inout State) -> Void) {
    state.withLock(owner: self) { body(&$0) }
  }

  var log: [String] { state.withLock(owner: self) { $0.log } }

  func requests(_ verb: String) -> Int { log.filter { $0.hasPrefix(verb + " ") }.count }

  /// A latch that opens when the `number`th status request has arrived.
  func statusRequest(_ number: Int) -> JobLatch {
    let (latch, arrived) = state.withLock(owner: self) { state -> (JobLatch, Bool) in
      let latch = state.statusLatches[number] ?? JobLatch()
      state.statusLatches[number] = latch
      return (latch, state.log.filter { $0.hasPrefix("status ") }.count >= number)
    }
    if arrived { latch.open() }
    return latch
  }

  private func record(_ line: String) -> State {
    state.withLock(owner: self) { state in
      state.log.append(line)
      return state
    }
  }

  func submit(_ request: String) async throws -> String {
    let gate = record("submit \(request)").submitGate
    submitArrived.open()
    await gate?.wait()
    return "job-1"
  }

  func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus {
    let current = record("status \(id) after \(sequence)")
    let number = current.log.filter { $0.hasPrefix("status ") }.count
    current.statusLatches[number]?.open()
    await current.statusGates[number]?.wait()
    if current.isDown { throw FakeOutage() }
    var status = current.status
    if !current.sendsAllMessages { status.messages.removeAll { $0.sequence <= sequence } }
    return status
  }

  func cancel(job id: String) async throws -> ServerJobStatus {
    let gate = record("cancel \(id)").cancelGate
    cancelArrived.open()
    await gate?.wait()
    return try state.withLock(owner: self) { state in
      guard state.cancellable else { throw ServerJobError.cancelNotSupported }
      state.state = .cancelled
      state.post("Cancelled at the client's request")
      return ServerJobStatus(state: .cancelled, messages: [state.messages.last!])
    }
  }

  func result(ofJob id: String) async throws -> String {
    let current = record("result \(id)")
    if current.isDown { throw FakeOutage() }
    return "result of \(id)"
  }
}

extension ServerJobRunnerTests {
  /// The same for a job paused while it waits for its next poll (the usual case: `pauseAll()` as
  /// the app goes to the background): it read the checkpoint the check saved after its pause
  /// point, and asked for the status all the same (the review of 5384735, helper 38).
  @Test func aJobPausedWaitingForItsPollFetchesOnlyTheResultAfterACheckFoundItSucceeded() async throws {
    let (job, server, manager) = try await pausedWaitingForItsPoll()
    server.update { $0.state = .succeeded }
    let checks = try await bounded { await manager.checkServerJobs() }
    #expect(try checks.first?.result.get().state == .succeeded)
    #expect(job.checkpoint?.lastState == .succeeded, "marked finished")
    let statusRequests = server.requests("status")

    job.start()
    #expect(try await job.output == "result of job-1")
    #expect(server.requests("status") == statusRequests, "the start fetched only the result: \(server.log)")
  }
}
