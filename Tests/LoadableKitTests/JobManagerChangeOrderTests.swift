import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

/// A job manager's list and events, and a finished job's handlers, in the order the changes came.
@Suite("JobManager: its list and events in order", .timeLimit(.minutes(1)))
struct JobManagerChangeOrderTests {
  /// JobManager.events "reports additions, removals, every job's status ..." — and the project's
  /// own `eventsReportAdditionsChangesAndRemovals` expects `.added` before the job's statuses. But
  /// `add(_:id:)` watches the job (adopt) and saves it before it emits `.added`, so a change of the
  /// job in that window (here made from the store's save, deterministically; in an app, the job's
  /// running work or another thread) reaches the stream as `.job(id, …)` before `.added(id)`.
  @Test func aJobsEventsComeAfterItsAddition() async throws {
    let store = StartingOnSaveStore()
    let manager = try JobManager(registry: JobRegistry(CountingWork.self, ScriptedWork.self), store: store)
    let events = manager.events
    let job = Job(ScriptedWork(runs: [[]]))
    store.jobToStart.withLock(owner: store) { $0 = job }
    let id = try manager.add(job, id: "j").id
    _ = try await job.output
    var seen: [String] = []
    for await event in events {
      if let described = describeAdditionsRemovalsAndStatuses(event) { seen.append(described) }
      if seen.last == "\(id) succeeded" { break }
    }
    #expect(seen == ["added j", "j started", "j succeeded"])
  }

  /// JobManager.jobs is "Observable (additions and removals)". `add(_:id:)` puts the job in the
  /// list before its first save and takes it out again when that save fails, telling the registrar
  /// of neither: a tracker that read `jobs` in between (from the store here; SwiftUI on the main
  /// thread, in an app) saw the job and is never told that it is gone.
  @Test func aTrackerThatSawAJobWhoseAddFailedIsTold() async throws {
    let store = FailingTrackingStore()
    let manager = try JobManager(registry: JobRegistry(CountingWork.self, ScriptedWork.self), store: store)
    store.manager.withLock(owner: store) { $0 = manager }
    #expect(throws: (any Error).self) { try manager.add(Job(ScriptedWork(runs: [[]])), id: "j") }
    #expect(store.seen.values == [["j"]], "the tracker saw the job")
    #expect(manager.jobs.isEmpty)
    #expect(store.changes.count == 1, "the tracker was not told that the job is gone")
  }

  /// Job.start(statusHandler:completion:): "when it had already finished, they run before this
  /// method returns — unless the job's observers are being delivered to at that moment (the call
  /// is made from a handler, or another thread delivers): then they run right after the
  /// deliveries queued before them, in order, possibly after this method returned". The doc said
  /// "before this method returns" without the exception; a handler may call back into the job, and
  /// running the new handlers inside the delivery under way would break "one call at a time".
  @Test func handlersOfAFinishedJobAddedFromAHandlerRunAfterTheDeliveryUnderWay() async throws {
    let job = Job(CountingWork(units: 1))
    job.start()
    _ = try await job.output
    let order = Recorder<String>()
    let outer = Counter()
    job.start(statusHandler: { _ in
      guard outer.increment() == 1 else { return }
      job.start(statusHandler: { order.append("inner status \($0)") }, completion: { _ in order.append("inner completion") })
      order.append("inner call returned")
    }, completion: { _ in })
    #expect(order.values == ["inner call returned", "inner status succeeded", "inner completion"])
    // Outside a delivery, they run before the call returns.
    let outside = Recorder<String>()
    job.start(statusHandler: { outside.append("status \($0)") }, completion: { _ in outside.append("completion") })
    outside.append("call returned")
    #expect(outside.values == ["status succeeded", "completion", "call returned"])
  }
}

final class FailingTrackingStore: JobStore, @unchecked Sendable {
  struct Refused: Error {}
  let manager = Mutex<JobManager?>(nil)
  let seen = Recorder<[String]>()
  let changes = Counter()
  func loadAll() throws -> [JobStoreRecord] { [] }
  func save(_ data: Data, id: String) throws {
    if let manager = manager.withLock(owner: self, { $0 }) {
      let changes = self.changes
      let jobs = withObservationTracking { manager.jobs } onChange: { changes.increment() }
      seen.append(jobs.map(\.id))
    }
    throw Refused()
  }
  func remove(id: String) throws {}
  func setAside(id: String) throws {}
}

/// A store whose first save starts the job it is given (as the job's own work or another thread
/// may change it while the manager adds it).
final class StartingOnSaveStore: JobStore, @unchecked Sendable {
  let jobToStart = Mutex<Job<ScriptedWork>?>(nil)
  private let records = Mutex<[String: Data]>([:])
  func loadAll() throws -> [JobStoreRecord] { [] }
  func save(_ data: Data, id: String) throws {
    records.withLock(owner: self) { $0[id] = data }
    let job = jobToStart.withLock(owner: self) { job in
      defer { job = nil }
      return job
    }
    job?.start()
  }
  func remove(id: String) throws { _ = records.withLock(owner: self) { $0.removeValue(forKey: id) } }
  func setAside(id: String) throws {}
}

/// A removal during an add's first save, and the events held meanwhile (a second review of the fix above).
extension JobManagerChangeOrderTests {
  /// JobManagerEvent: `.job` is "A job the manager holds changed"; `.added` "A job was added",
  /// `.removed` "A job was removed". A `remove(id:)` that comes while `add(_:id:)` makes its first
  /// save (here from the store's save, deterministically; in an app, another thread or the
  /// manager's `jobs` list in a UI) reported `.removed` at once; the add then reported `.added` —
  /// after the removal — and only then the job's own events, which `announced`/`early` held for
  /// it: the stream told `removed j, added j, j failed` (the cancel of the unstarted job), a job's
  /// events after its removal, for a job the manager does not hold. (`add` still returns the job
  /// as added although `jobs` is empty: not changed.)
  @Test func aJobRemovedWhileItsAddSavesIsNotReportedAddedAfterItsRemoval() async throws {
    let store = RemovingOnSaveStore()
    let manager = try JobManager(registry: JobRegistry(CountingWork.self, ScriptedWork.self), store: store)
    store.manager.withLock(owner: store) { $0 = manager }
    let events = manager.events(bufferingPolicy: .unbounded)
    let job = Job(ScriptedWork(runs: [[]]))
    var addError: (any Error)?
    do { _ = try manager.add(job, id: "j") } catch { addError = error }
    await eventually { store.removed.count == 1 }
    #expect(store.removed.values == ["removed"])
    var seen: [String] = []
    for await event in events {
      if let described = describeAdditionsRemovalsAndStatuses(event) { seen.append(described) }
      if seen.count == 3 || (addError != nil && seen.count == 2) { break }
    }
    let removedAt = seen.firstIndex(of: "removed j")
    #expect(removedAt == seen.count - 1, "events after the job's removal: \(seen) (add threw: \(String(describing: addError)))")
    #expect(manager.jobs.isEmpty)
  }

  /// The brief's ground rule, bounded growth; `events`: "The stream keeps the newest
  /// defaultEventBufferLimit events for a consumer that falls behind"; a job's messages keep at
  /// most `messageLimit`. While `add(_:id:)` makes its first save, every event of the job is held
  /// in the entry's `early`, without a bound: a job running while the
  /// save is slow (here: 5,000 messages posted during it, the work run inline from the store's save
  /// to place it deterministically) holds all 5,000 in memory, five times what the stream would
  /// ever keep — and a save that never returns holds them for ever.
  @Test func eventsHeldForAnAddThatSavesAreBounded() async throws {
    let store = RunningOnSaveStore()
    let manager = try JobManager(registry: JobRegistry(CountingWork.self, ScriptedWork.self), store: store)
    store.manager.withLock(owner: store) { $0 = manager }
    let job = Job(ScriptedWork(runs: [Array(repeating: .post("m", .info), count: 5_000)]))
    store.jobToStart.withLock(owner: store) { $0 = job }
    try manager.add(job, id: "j")
    let held = store.heldDuringSave.values
    #expect(held.count == 1)
    #expect(
      (held.first ?? 0) <= JobManager.defaultEventBufferLimit,
      "events held for the add: \(held), the stream's bound \(JobManager.defaultEventBufferLimit)")
  }
}

final class RemovingOnSaveStore: JobStore, @unchecked Sendable {
  let manager = Mutex<JobManager?>(nil)
  let removed = Recorder<String>()
  private let saves = Counter()
  func loadAll() throws -> [JobStoreRecord] { [] }
  func save(_ data: Data, id: String) throws {
    guard saves.increment() == 1, let manager = manager.withLock(owner: self, { $0 }) else { return }
    let removed = self.removed
    Task(executorPreference: InlineTaskExecutor()) {
      do {
        try await manager.remove(id: id)
        removed.append("removed")
      } catch {
        removed.append("remove threw \(error)")
      }
    }
  }
  func remove(id: String) throws {}
  func setAside(id: String) throws {}
}

/// A store whose first save runs the job it is given to its end, inline (its task runs on an
/// inline executor), and records how many of the job's events the manager holds at that moment.
final class RunningOnSaveStore: JobStore, @unchecked Sendable {
  let manager = Mutex<JobManager?>(nil)
  let jobToStart = Mutex<Job<ScriptedWork>?>(nil)
  let heldDuringSave = Recorder<Int>()
  func loadAll() throws -> [JobStoreRecord] { [] }
  func save(_ data: Data, id: String) throws {
    let job = jobToStart.withLock(owner: self) { job in
      defer { job = nil }
      return job
    }
    guard let job, let manager = manager.withLock(owner: self, { $0 }) else { return }
    TaskLaunch.executor.withValue(InlineTaskExecutor()) { _ = job.start() }
    if let entry = manager.entry(id: id) {
      heldDuringSave.append(entry.writer.withLock(owner: entry) { $0.early.count })
    }
  }
  func remove(id: String) throws {}
  func setAside(id: String) throws {}
}

/// A manager's event as these tests compare it: additions, removals and a job's statuses (`nil`
/// for the rest).
func describeAdditionsRemovalsAndStatuses(_ event: JobManagerEvent) -> String? {
  switch event {
  case .added(let added): "added \(added)"
  case .removed(let removed): "removed \(removed)"
  case .job(let jobID, .status(let status)): "\(jobID) \(status)"
  case .job, .saveFailed: nil
  }
}
