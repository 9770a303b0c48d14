import Dispatch
import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A fresh directory under the temporary directory, removed by the caller.
func makeJobDirectory() -> URL {
  let url = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID().uuidString)", isDirectory: true)
  try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  return url
}

/// A store in memory that counts saves and lets a test wait for them.
final class MemoryJobStore: JobStore, @unchecked Sendable {
  private let records = Mutex<[String: Data]>([:])
  private let saves = Mutex<(count: Int, waiters: [(Int, UnsafeContinuation<Void, Never>)])>((0, []))

  func loadAll() throws -> [JobStoreRecord] {
    records.withLock(owner: self) { $0.map { JobStoreRecord(id: $0.key, data: .success($0.value)) } }
  }
  func save(_ data: Data, id: String) throws {
    records.withLock(owner: self) { $0[id] = data }
    let ready = saves.withLock(owner: self) { state in
      state.count += 1
      let count = state.count
      let ready = state.waiters.filter { $0.0 <= count }.map(\.1)
      state.waiters.removeAll { $0.0 <= count }
      return ready
    }
    for waiter in ready { waiter.resume() }
  }
  func remove(id: String) throws { _ = records.withLock(owner: self) { $0.removeValue(forKey: id) } }
  func setAside(id: String) throws {}

  subscript(id: String) -> Data? { records.withLock(owner: self) { $0[id] } }
  var saveCount: Int { saves.withLock(owner: self) { $0.count } }

  /// Waits until `count` saves happened in all.
  func waitForSaves(_ count: Int) async {
    await withUnsafeContinuation { continuation in
      let now = saves.withLock(owner: self) { state -> Bool in
        if state.count >= count { return true }
        state.waiters.append((count, continuation))
        return false
      }
      if now { continuation.resume() }
    }
  }

  /// The saved JSON of job `id` as an object.
  func object(_ id: String) -> [String: Any]? {
    self[id].flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
  }
}

/// A store whose deletions wait, on the thread that deletes, until the test opens its gate.
final class GatedRemovalStore: JobStore, @unchecked Sendable {
  let memory = MemoryJobStore()
  private let gate = DispatchSemaphore(value: 0)
  private let removals = Atomic<Int>(0)

  /// How many deletions began.
  var removalCount: Int { removals.load(ordering: .acquiring) }

  func loadAll() throws -> [JobStoreRecord] { try memory.loadAll() }
  func save(_ data: Data, id: String) throws { try memory.save(data, id: id) }
  func remove(id: String) throws {
    removals.add(1, ordering: .acquiringAndReleasing)
    if gate.wait(timeout: .now() + .seconds(30)) == .success { gate.signal() }  // open, it stays open
    try memory.remove(id: id)
  }
  func setAside(id: String) throws {}

  func open() { gate.signal() }
}

@Suite("Jobs: JobManager", .timeLimit(.minutes(2)))
struct JobManagerTests {
  let registry = JobRegistry(CountingWork.self, ScriptedWork.self)

  /// Adds jobs in every status to a manager on `directory`; returns their ids by status.
  func makeJobsInEveryStatus(in directory: URL) async throws -> (
    ids: [JobStatus: (id: String, work: CountingWork)], release: JobLatch
  ) {
    let manager = try JobManager(registry: registry, directory: directory)
    var ids: [JobStatus: (id: String, work: CountingWork)] = [:]

    let notStarted = CountingWork(units: 3)
    ids[.notStarted] = (try manager.add(Job(notStarted)).id, notStarted)

    // Running, held before unit 2: its checkpoint (next 2) is stored.
    let (running, runningWork, release) = await startJob(units: 4, heldAt: 2)
    ids[.started] = (try manager.add(running).id, runningWork)

    // Paused at a checkpoint.
    let (paused, pausedWork, releasePaused) = await startJob(units: 4, heldAt: 1)
    ids[.paused] = (try manager.add(paused).id, pausedWork)
    paused.pause()
    releasePaused.open()
    await paused.waitUntilParked()

    let succeeded = CountingWork(units: 2)
    let succeededJob = Job(succeeded)
    ids[.succeeded] = (try manager.add(succeededJob).id, succeeded)
    succeededJob.start()
    _ = try await succeededJob.output

    let failed = CountingWork(units: 2)
    let failedJob = Job(failed)
    ids[.failed] = (try manager.add(failedJob).id, failed)
    await failedJob.cancel()

    #expect(manager.jobs.count == 5)
    // The running job stays held: the next manager restores it from its store.
    return (ids, release)
  }

  @Test func savesAndRestoresJobsInEveryStatus() async throws {
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let (ids, release) = try await makeJobsInEveryStatus(in: directory)

    let manager = try JobManager(registry: registry, directory: directory)
    #expect(manager.restoreProblems.isEmpty)
    #expect(Set(manager.jobs.map(\.id)) == Set(ids.values.map(\.id)))
    func restored(_ status: JobStatus) throws -> Job<CountingWork> {
      try #require(manager.job(id: ids[status]!.id) as? Job<CountingWork>)
    }
    #expect(try restored(.notStarted).status == .notStarted)
    #expect(try restored(.started).status == .paused)
    #expect(try restored(.started).checkpoint?.next == 2)
    #expect(try restored(.paused).status == .paused)
    #expect(try restored(.paused).checkpoint?.next == 2)
    #expect(try restored(.succeeded).status == .succeeded)
    #expect(try restored(.failed).status == .failed)
    #expect(try restored(.failed).error is CancellationError)

    // resumeAll resumes the paused ones, from their checkpoints (the held work and the restored
    // job share the hook that holds unit 2: let both go).
    release.open()
    #expect(manager.resumeAll() == 2)
    for status in [JobStatus.started, .paused] {
      let job = try restored(status)
      #expect(try await job.output == ids[status]!.work.expectedOutput)
    }
    #expect(try restored(.notStarted).status == .notStarted)
    #expect(try restored(.succeeded).start() == false)
  }

  @Test func removeCancelsAndDeletesTheRecord() async throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let id = try manager.add(job).id
    #expect(store[id] != nil)
    release.open()
    async let removal: Void = manager.remove(id: id)
    try await removal
    #expect(store[id] == nil)
    #expect(manager.jobs.isEmpty)
    #expect(job.status.isFinished)
    await #expect(throws: JobError.unknownJob) { try await manager.remove(id: id) }
    #expect(await manager.cancel(id: id) == false)
  }

  /// Starts two removals of job `id`, each on a task of its own (on an executor `executor` makes,
  /// if given), and records whether each returned without an error. Not awaited: a removal nobody
  /// answers would never return, where a bounded `eventually` on the record fails.
  func startRemovals(
    of id: String, in manager: JobManager, executor: (() -> any TaskExecutor)? = nil
  ) -> Recorder<Bool> {
    let returned = Recorder<Bool>()
    for _ in 0..<2 {
      Task(executorPreference: executor?()) {
        do {
          try await manager.remove(id: id)
          returned.append(true)
        } catch {
          returned.append(false)
        }
      }
    }
    return returned
  }

  /// Two removals of one running job that wait for its cancel together: both return once its
  /// record is deleted, and the job is removed once — one `.removed` event, not one a caller.
  @Test func twoRemovalsOfOneJobRemoveItOnce() async throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let id = try manager.add(job).id
    let events = manager.events
    let before = job.waiterCountForTesting
    let returned = startRemovals(of: id, in: manager)
    await eventually { job.waiterCountForTesting == before + 2 }  // both wait for its cancel
    release.open()
    await eventually { returned.count == 2 }
    #expect(returned.values == [true, true])
    #expect(store[id] == nil)
    #expect(manager.jobs.isEmpty)
    // A job added after both returned marks the end of what the removals reported.
    let marker = try manager.add(Job(ScriptedWork(runs: [[]]))).id
    var removed = 0
    for await event in events {
      if case .removed(let removedID) = event, removedID == id { removed += 1 }
      if case .added(let added) = event, added == marker { break }
    }
    #expect(removed == 1)
  }

  /// Callers waiting for one deletion of a job's record are all answered by it, not only the
  /// first: two removals wait for the job's cancel together, then both for the deletion, which
  /// the store holds until both wait.
  @Test func everyRemovalWaitingForOneDeletionReturns() async throws {
    let store = GatedRemovalStore()
    let manager = try JobManager(registry: registry, store: store)
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let id = try manager.add(job).id
    let entry = try #require(manager.entry(id: id))
    let before = job.waiterCountForTesting
    // A deletion blocks its thread until the gate opens: each removal runs on a queue of its own,
    // not on the pool's threads, which the job (and every other test) needs.
    let returned = startRemovals(of: id, in: manager, executor: QueueExecutor.init)
    await eventually { job.waiterCountForTesting == before + 2 }  // both wait for its cancel
    release.open()
    await eventually { entry.removalWaiterCountForTesting == 2 && store.removalCount == 1 }
    store.open()
    await eventually { returned.count == 2 }
    #expect(returned.values == [true, true])
    #expect(store.memory[id] == nil)
    #expect(manager.jobs.isEmpty)
  }

  @Test func cancelEndsTheJobAndStoresIt() async throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let clock = TestClock()
    let work = CountingWork(units: 3)
    JobHooks.set(work.id, holdJobAt(1, on: clock))
    let job = Job(work)
    let id = try manager.add(job).id
    job.start()
    try await clock.waitForSleepers(1)
    #expect(await manager.cancel(id: id))
    #expect(store.object(id)?["status"] as? String == "failed")
    #expect(manager.jobs.count == 1)
  }

  @Test func aJobOfAnUnregisteredKindIsRefused() throws {
    let manager = try JobManager(registry: JobRegistry(ScriptedWork.self), store: MemoryJobStore())
    #expect(throws: JobError.unknownKind) { try manager.add(Job(CountingWork(units: 1))) }
    let job = Job(ScriptedWork(runs: [[]]))
    try manager.add(job)
    #expect(throws: JobError.unknownJob) { try manager.add(job) }
  }

  @Test func twoManagersOnOneDirectoryIsATypedError() throws {
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    var first: JobManager? = try JobManager(registry: registry, directory: directory)
    #expect(throws: JobError.storeLocked) { try JobManager(registry: registry, directory: directory) }
    _ = first
    first = nil  // the lock goes with the first manager's store
    _ = try JobManager(registry: registry, directory: directory)
  }

  /// A lock held by another open file description (as by another process) fails the store with
  /// the typed error, once its short wait for a forked child's copy is over; released, it is
  /// taken.
  @Test func aDirectoryLockedElsewhereIsATypedError() throws {
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let descriptor = open(directory.appendingPathComponent(".lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    #expect(descriptor >= 0)
    #expect(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
    #expect(throws: JobError.storeLocked) { try DirectoryJobStore(directory: directory) }
    close(descriptor)
    _ = try DirectoryJobStore(directory: directory)
  }

  @Test func badFilesAreReportedAndTheOtherJobsStillLoad() async throws {
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let good = CountingWork(units: 2)
    let goodID: String
    do {
      let manager = try JobManager(registry: registry, directory: directory)
      goodID = try manager.add(Job(good)).id
    }
    let valid = try Job(CountingWork(units: 2)).toJSON()
    var newer = try #require(try JSONSerialization.jsonObject(with: valid) as? [String: Any])
    newer["schemaVersion"] = 2
    var foreign = try #require(try JSONSerialization.jsonObject(with: valid) as? [String: Any])
    foreign["kind"] = "com.example.unknown"
    let files: [String: Data] = [
      "truncated": valid.prefix(valid.count / 2),
      "malformed": Data("{\"schemaVersion\":1,\"kind\":\"test.counting\",\"parameters\":42}".utf8),
      "newer": try JSONSerialization.data(withJSONObject: newer),
      "foreign": try JSONSerialization.data(withJSONObject: foreign),
    ]
    for (name, data) in files { try data.write(to: directory.appendingPathComponent("\(name).json")) }

    let manager = try JobManager(registry: registry, directory: directory)
    #expect(manager.jobs.map(\.id) == [goodID])
    let problems = Dictionary(uniqueKeysWithValues: manager.restoreProblems.map { ($0.id, $0) })
    #expect(problems["truncated"]?.error == .truncated)
    #expect(problems["malformed"]?.error == .malformed)
    #expect(problems["newer"]?.error == .unsupportedSchemaVersion)
    #expect(problems["foreign"]?.error == .unknownKind)
    #expect(problems["truncated"]?.wasSetAside == true)
    #expect(problems["malformed"]?.wasSetAside == true)
    #expect(problems["newer"]?.wasSetAside == false)
    #expect(problems["foreign"]?.wasSetAside == false)
    // Nothing is deleted: set aside, or left for the version or app that can read it.
    let aside = directory.appendingPathComponent("Set aside")
    #expect(FileManager.default.fileExists(atPath: aside.appendingPathComponent("truncated.json").path))
    #expect(FileManager.default.fileExists(atPath: aside.appendingPathComponent("malformed.json").path))
    #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("newer.json").path))
    #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("foreign.json").path))
  }

  @Test func progressAndMessagesAreSavedAtMostOncePerInterval() async throws {
    let store = MemoryJobStore()
    let clock = TestClock()
    let manager = try JobManager(registry: registry, store: store, clock: clock, saveInterval: .seconds(5))
    let work = ScriptedWork(runs: [[.post("a", .info), .report(completed: 1, total: 4), .post("b", .info), .hook]])
    let arrived = JobLatch()
    let release = JobLatch()
    JobHooks.set(work.id, latchJobAt(3, arrived: arrived, release: release))
    let job = Job(work)
    let id = try manager.add(job).id  // save 1
    job.start()  // save 2: started
    await arrived.wait()
    #expect(store.saveCount == 2)
    #expect((store.object(id)?["messages"] as? [Any])?.count == 0)
    try await clock.waitForSleepers(1)  // one flush scheduled for the three changes
    await clock.advance(by: .seconds(5))
    await store.waitForSaves(3)
    #expect((store.object(id)?["messages"] as? [Any])?.count == 2)
    #expect(store.object(id)?["fractionCompleted"] as? Double == 0.25)
    release.open()
    _ = try await job.output
    await store.waitForSaves(4)
    #expect(store.object(id)?["status"] as? String == "succeeded")
  }

  @Test func eventsReportAdditionsChangesAndRemovals() async throws {
    let manager = try JobManager(registry: registry, store: MemoryJobStore())
    let events = manager.events
    let job = Job(ScriptedWork(runs: [[]]))
    let id = try manager.add(job).id
    job.start()
    _ = try await job.output
    try await manager.remove(id: id)
    var seen: [String] = []
    for await event in events {
      switch event {
      case .added(let added): seen.append("added \(added == id)")
      case .removed(let removed):
        seen.append("removed \(removed == id)")
      case .job(_, .status(let status)): seen.append("\(status)")
      case .job, .saveFailed: break
      }
      if seen.last?.hasPrefix("removed") == true { break }
    }
    #expect(seen == ["added true", "started", "succeeded", "removed true"])
  }

  /// Every stream of the manager's events hears every event, and every one ends when the manager
  /// is released — not only the first one made.
  @Test func everyEventStreamHearsEveryEventAndEndsWithTheManager() async throws {
    var manager: JobManager? = try JobManager(registry: registry, store: MemoryJobStore())
    let streams = (0..<3).map { _ in manager!.events }
    let id = try manager!.add(Job(ScriptedWork(runs: [[]]))).id
    let seen = Recorder<String>()
    for (index, stream) in streams.enumerated() {
      Task {
        for await event in stream {
          if case .added(let added) = event, added == id { seen.append("\(index) added") }
        }
        seen.append("\(index) ended")
      }
    }
    await eventually { seen.count == 3 }  // each stream heard the addition
    manager = nil
    await eventually { seen.count == 6 }
    #expect(Set(seen.values) == ["0 added", "1 added", "2 added", "0 ended", "1 ended", "2 ended"])
  }

  /// `pauseAll()` pauses every running job and returns once each is parked — not only the first.
  @Test func pauseAllPausesEveryRunningJob() async throws {
    let manager = try JobManager(registry: registry, store: MemoryJobStore())
    let work = (0..<3).map { _ in ScriptedWork(runs: [[.hook, .pausePoint, .hook]]) }
    let entered = (0..<3).map { _ in JobLatch() }
    let release = JobLatch()
    for (index, item) in work.enumerated() {
      JobHooks.set(item.id) { unit in
        if unit == 0 {
          entered[index].open()
          await release.wait()
        }
      }
    }
    let jobs = work.map { Job($0) }
    for job in jobs {
      _ = try manager.add(job)
      job.start()
    }
    for latch in entered { await latch.wait() }  // each job's work is in its first unit
    let pausing = Task { await manager.pauseAll() }
    await eventually { jobs.allSatisfy { $0.status == .paused } }
    release.open()  // each work reaches its pause point, and parks there
    await pausing.value
    #expect(jobs.map(\.status) == [.paused, .paused, .paused])
    for job in jobs { job.start() }
    for job in jobs { _ = try await job.output }
  }

  /// The work does not go past a pause point before its checkpoint is stored, even when another
  /// thread is delivering the job's events (and so saves it) at that moment.
  @Test func pausePointsWaitUntilTheCheckpointIsStored() async throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let work = ScriptedWork(runs: [[.hook, .checkpoint(1), .hook, .pausePoint, .hook]])
    let saved = JobLatch()
    let storedAtPausePoint = Mutex<Int?>(nil)
    let owner = JobSentinel()
    let job = Job(work)
    let id = try manager.add(job).id
    let handlerEntered = JobLatch()
    JobHooks.set(work.id) { unit in
      if unit == 0 { await handlerEntered.wait() }
      if unit == 2 { saved.open() }
      if unit == 4 {
        let checkpoint = store.object(id)?["checkpoint"] as? Int
        storedAtPausePoint.withLock(owner: owner) { $0 = checkpoint }
      }
    }
    // A status handler that blocks keeps this job's deliveries on another thread.
    let blocked = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      job.start(statusHandler: { _ in
        handlerEntered.open()
        blocked.wait()
      }) { _ in }
    }
    await handlerEntered.wait()
    await saved.wait()  // the checkpoint was saved while the handler blocks the deliveries
    blocked.signal()
    for _ in 0..<8 { blocked.signal() }  // later status changes pass too
    _ = try await job.output
    #expect(storedAtPausePoint.withLock(owner: owner) { $0 } == 1)
  }
}
