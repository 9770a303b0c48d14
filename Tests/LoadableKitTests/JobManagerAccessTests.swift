import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 29: a managed job without casts — ids the app chooses, a job's id from the job, typed
/// access, and a cancel that says whether the server cancelled.
@Suite("Jobs: JobManager ids and typed access", .timeLimit(.minutes(1)))
struct JobManagerAccessTests {
  let clock = TestClock()
  let registry = JobRegistry(CountingWork.self, ScriptedWork.self)

  @Test func anAppChoosesAJobsIDAndADuplicateIsATypedError() async throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let first = Job(CountingWork(units: 1))
    #expect(try manager.add(first, id: "download-redlands").id == "download-redlands")
    #expect(store["download-redlands"] != nil)
    #expect(first.managedID == "download-redlands", "the job knows its id")
    #expect((first as any JobHandle).managedID == "download-redlands", "so does its handle")

    let second = Job(CountingWork(units: 2))
    #expect(throws: JobError.duplicateID) { try manager.add(second, id: "download-redlands") }
    #expect(second.managedID == nil, "not added")
    #expect(manager.jobs.count == 1)
    #expect(manager.job(id: "download-redlands") === first, "the first one stays")

    // A job one manager holds cannot join another.
    let other = try JobManager(registry: registry, store: MemoryJobStore())
    #expect(throws: JobError.unknownJob) { try other.add(first, id: "again") }

    // An id its store cannot name is the store's typed error, and nothing is added.
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let onDisk = try JobManager(registry: registry, directory: directory)
    #expect(throws: JobError.storeFailed) { try onDisk.add(second, id: "../escape") }
    #expect(onDisk.jobs.isEmpty)
    #expect(second.managedID == nil)
    try onDisk.add(second, id: "tiles")
    #expect(second.managedID == "tiles")

    try await manager.remove(id: "download-redlands")
    #expect(first.managedID == nil, "a removed job has no id")
  }

  @Test func aRestoredJobKnowsItsID() async throws {
    let store = MemoryJobStore()
    do {
      let manager = try JobManager(registry: registry, store: store)
      try manager.add(Job(CountingWork(units: 3)), id: "mine")
    }
    let manager = try JobManager(registry: registry, store: store)
    #expect(manager.job(id: "mine")?.managedID == "mine")
  }

  @Test func typedAccessWithoutACast() async throws {
    let manager = try JobManager(registry: registry, store: MemoryJobStore())
    let work = CountingWork(units: 3)
    let managed = try manager.add(Job(work), id: "count")
    let job: Job<CountingWork>? = manager.job(id: "count", as: CountingWork.self)
    #expect(job?.status == .notStarted)
    #expect(manager.job(id: "count", as: ScriptedWork.self) == nil, "another type")
    #expect(manager.job(id: "nothing", as: CountingWork.self) == nil)
    #expect(managed.job(as: CountingWork.self) === job)
    job?.start()
    #expect(try await managed.job(as: CountingWork.self)?.output == work.expectedOutput)
    #expect(managed.job(as: CountingWork.self)?.checkpoint?.next == 3)
  }

  /// The server job's id is on the handle: no cast.
  @Test func aHandleHasTheServerJobID() async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    FakeJobServers.set(work.id, server: FakeJobServer(), clock: clock)
    let job = Job(work, options: JobOptions(clock: clock))
    let handle: any JobHandle = job
    #expect(handle.serverJobID == nil)
    job.start()
    try await clock.waitForSleepers(1)
    #expect(handle.serverJobID == "job-1")
    #expect((Job(CountingWork(units: 1)) as any JobHandle).serverJobID == nil, "not a server job")
    await job.cancel()
  }

  /// `cancel()` says whether the job was cancelled; `cancelAndReport()` also says whether the
  /// server cancelled its job.
  @Test(arguments: [true, false])
  func aCancelSaysWhetherTheServerCancelled(serverCancels: Bool) async throws {
    let work = RemoteWork(id: UUID().uuidString, request: "area 51")
    let server = FakeJobServer()
    FakeJobServers.set(work.id, server: server, clock: clock)
    server.update {
      $0.state = .executing
      $0.cancellable = serverCancels
    }
    var registry = JobRegistry()
    registry.register(RemoteWork.self, options: JobOptions(clock: clock))
    let manager = try JobManager(registry: registry, store: MemoryJobStore(), clock: TestClock())
    let job = Job(work, options: JobOptions(clock: clock))
    try manager.add(job, id: "offline-map")
    job.start()
    try await clock.waitForSleepers(1)
    let outcome = await manager.cancelAndReport(id: "offline-map")
    if serverCancels {
      #expect(outcome == .cancelled)
    } else {
      #expect(outcome == .serverDidNotCancel(.cancelNotSupported))
    }
    #expect(job.status == .failed)
    #expect(await job.cancelAndReport() == .notCancelled, "already finished")
    #expect(await manager.cancelAndReport(id: "nothing") == nil)
    // A client job the server has no part in.
    let counting = Job(CountingWork(units: 1))
    #expect(await counting.cancelAndReport() == .cancelled)
  }
}
