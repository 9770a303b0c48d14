import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The records a ``JobManager`` restores, keeps and leaves in place (Jobs.md, "What cannot be
/// restored": "The manager never crashes on a record and never deletes one"), and numbers in a
/// record that no count reaches ("Malformed … JSON is rejected …, never a crash", SPEC §4). Found
/// by a second review of the jobs (helper 36).
@Suite("Jobs: records kept and left in place", .timeLimit(.minutes(2)))
struct JobRecordTests {
  let registry = JobRegistry(CountingWork.self, ScriptedWork.self)

  /// Adds a job "x" to `manager` whose message schedules a save (it waits out the save interval on
  /// `clock`), lets it finish, and removes it: how the removal ended, and the job, held weakly
  /// (the scheduled save's task holds it until it has run).
  func removeAJobWithASaveScheduled(
    from manager: JobManager, clock: TestClock
  ) async throws -> (removal: Result<Void, any Error>, job: WeakReference<Job<ScriptedWork>>) {
    let first = Job(ScriptedWork(runs: [[.post("a message", .info)]]))
    try manager.add(first, id: "x")
    first.start()
    _ = try await first.output
    try await clock.waitForSleepers(1)  // the save the message scheduled waits for the interval
    let removal: Result<Void, any Error>
    do { removal = .success(try await manager.remove(id: "x")) } catch { removal = .failure(error) }
    return (removal, WeakReference(first))
  }

  /// A record the manager could not restore is left in place for the app that can (a newer
  /// version, a kind registered elsewhere); adding a job under its id must not overwrite it.
  @Test func addingUnderTheIDOfARecordLeftInPlaceDoesNotOverwriteIt() async throws {
    let directory = makeJobDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    var newer = try #require(
      try JSONSerialization.jsonObject(with: Job(CountingWork(units: 2)).toJSON()) as? [String: Any])
    newer["schemaVersion"] = 2
    newer["somethingOnlyVersion2Knows"] = "precious"
    let file = directory.appendingPathComponent("tiles.json")
    let original = try JSONSerialization.data(withJSONObject: newer)
    try original.write(to: file)

    let manager = try JobManager(registry: registry, directory: directory)
    #expect(manager.restoreProblems.map(\.id) == ["tiles"])
    #expect(manager.restoreProblems.first?.error == .unsupportedSchemaVersion)

    let job = Job(CountingWork(units: 1))
    let added = Result { try manager.add(job, id: "tiles") }
    #expect(try Data(contentsOf: file) == original, "the newer version's record was overwritten")
    #expect(throws: JobError.self) { try added.get() }
    #expect((try? added.get()) == nil && (added.error as? JobError)?.code == .duplicateID)
    #expect(manager.jobs.isEmpty)
    // The job was not taken: another id adds it.
    _ = try manager.add(job, id: "tiles-2")
    #expect(manager.jobs.map(\.id) == ["tiles-2"])
  }

  /// `remove(id:)` deletes the record of the job removed, and of no other: a save that a message
  /// scheduled before the removal (it waits out the save interval) must not delete the record of
  /// a job added later under the same id.
  @Test func aSaveScheduledForARemovedJobDoesNotDeleteTheRecordOfTheNextJobWithItsID() async throws {
    let store = MemoryJobStore()
    let clock = TestClock()
    let manager = try JobManager(registry: registry, store: store, clock: clock, saveInterval: .seconds(5))
    let (removal, first) = try await removeAJobWithASaveScheduled(from: manager, clock: clock)
    try removal.get()
    #expect(store["x"] == nil)
    let second = Job(CountingWork(units: 3))
    try manager.add(second, id: "x")
    #expect(store["x"] != nil)

    await clock.advance(by: .seconds(5))  // the first job's scheduled save comes due
    // Its task holds the first job's entry (and so the job) until it has run.
    await eventually { first.value == nil }

    #expect(store["x"] != nil, "the second job's record was deleted")
    #expect(manager.job(id: "x") === second)
    let restarted = try JobManager(registry: registry, store: RecordsCopy(store))
    #expect(restarted.jobs.map(\.id) == ["x"])
  }

  /// A record whose `droppedMessageCount` is as large as an `Int` goes and which holds more
  /// messages than its limit: the count saturates, as it does for a restored job that posts.
  @Test func aDroppedMessageCountNoCountReachesIsNoCrash() async {
    await #expect(processExitsWith: .success) {
      let work = ScriptedWork(runs: [[.post("c", .info)]])
      var object = try! JSONSerialization.jsonObject(with: Job(work).toJSON()) as! [String: Any]
      object["droppedMessageCount"] = Int.max
      object["messageLimit"] = 1
      object["messages"] = [
        ["text": "a", "severity": "info", "timestamp": "2025-11-22T10:41:53.438Z"],
        ["text": "b", "severity": "info", "timestamp": "2025-11-22T10:41:54.438Z"],
      ]
      let job = try! Job<ScriptedWork>.fromJSON(try! JSONSerialization.data(withJSONObject: object))
      guard job.messages.map(\.text) == ["b"] else { exit(2) }
      job.start()  // posts "c" as it runs: "b" is dropped too
      _ = try? await job.output
      let saved = try! JSONSerialization.jsonObject(with: job.toJSON()) as! [String: Any]
      guard saved["droppedMessageCount"] as? Int == Int.max, job.messages.map(\.text) == ["c"] else { exit(3) }
    }
  }

  /// A record whose place (`addedSequence`) is as large as an `Int` goes: the manager restores it
  /// (first, where its place puts it) and the next job added comes after it.
  @Test func anAddedSequenceNoCountReachesIsNoCrash() async {
    await #expect(processExitsWith: .success) {
      let store = MemoryJobStore()
      for (id, sequence) in [("last", Int.max), ("first", 3)] {
        var object = try! JSONSerialization.jsonObject(with: Job(CountingWork(units: 1)).toJSON()) as! [String: Any]
        object["addedSequence"] = sequence
        try! store.save(try! JSONSerialization.data(withJSONObject: object), id: id)
      }
      let registry = JobRegistry(CountingWork.self)
      let manager = try! JobManager(registry: registry, store: store)
      _ = try! manager.add(Job(CountingWork(units: 1)), id: "added")
      guard manager.jobs.map(\.id) == ["first", "last", "added"] else { exit(2) }
      // The order survives a restart.
      manager.saveAll()
      let restarted = try! JobManager(registry: registry, store: RecordsCopy(store))
      guard restarted.jobs.map(\.id) == ["first", "last", "added"] else { exit(3) }
    }
  }
  /// Nor does a save *in progress* when `remove(id:)` comes: the job leaves `jobs` (and
  /// `.removed` is emitted) before its record is deleted, and a job added under its id meanwhile
  /// had its record saved, then overwritten by the old save and deleted by the old writer's
  /// deletion pass. The id is taken until the record is deleted (the review of f215f2b, helper 38).
  @Test func aSaveInProgressForARemovedJobDoesNotDeleteTheRecordOfTheNextJobWithItsID() async throws {
    let store = GatedJobStore()
    let registry = JobRegistry(CountingWork.self, ScriptedWork.self)
    let manager = try JobManager(registry: registry, store: store)
    let first = Job(CountingWork(units: 3))
    try manager.add(first, id: "x")
    let entry = try #require(manager.entry(id: "x"))

    // A save of the first job is in progress on another thread (its store call blocks).
    store.blockNextSave()
    let saver = Thread { manager.saveAll() }
    saver.start()
    store.entered.wait()

    // It is removed meanwhile: out of `jobs` at once, its deletion waits for the writer.
    let removal = Task { try await manager.remove(id: "x") }
    await eventually { entry.removalWaiterCountForTesting == 1 }
    #expect(manager.jobs.isEmpty)

    // The app adds a new job under the id (it heard `.removed`): the id is still taken.
    let second = Job(ScriptedWork(runs: [[]]))
    #expect(throws: JobError.self) { try manager.add(second, id: "x") }

    // The old save goes on: it writes the first job, and the old writer deletes "x".
    store.release.signal()
    try await removal.outcome
    #expect(store["x"] == nil)
    // Once `remove(id:)` returned, the id is free: the new job's record is the one that stays.
    try manager.add(second, id: "x")
    #expect(manager.job(id: "x") === second)
    let now = store["x"].map { String(decoding: $0, as: UTF8.self) }
    #expect(now?.contains(ScriptedWork.kind) == true, "the second job's record: \(now ?? "deleted")")
  }

  /// JobManagerEvent.saveFailed: "The store could not save a job; the job goes on, and the
  /// manager tries again at its next change." After a deletion that failed, the save a message
  /// scheduled before the removal reported the deletion's failure as `saveFailed(id: "x")` when it
  /// came due — though it asked the store nothing, and "x" names another job by then, whose record
  /// is fine (helper 38).
  @Test func aStaleSaveAfterAFailedDeletionReportsNoSaveFailureForTheNextJobWithItsID() async throws {
    let store = GatedJobStore(failsDeletions: true)
    let clock = TestClock()
    let registry = JobRegistry(CountingWork.self, ScriptedWork.self)
    let manager = try JobManager(registry: registry, store: store, clock: clock, saveInterval: .seconds(5))
    let (removal, first) = try await removeAJobWithASaveScheduled(from: manager, clock: clock)
    #expect(throws: JobError.self) { try removal.get() }  // the store failed
    let second = Job(CountingWork(units: 1))
    try manager.add(second, id: "x")
    #expect(store["x"] != nil)

    let events = manager.events
    await clock.advance(by: .seconds(5))  // the first job's scheduled save comes due
    await eventually { first.value == nil }  // and has run
    second.start()  // a sentinel: the second job's events come after whatever the stale save said
    var seen: [String] = []
    for await event in events {
      if case .saveFailed(let id, let error) = event { seen.append("saveFailed \(id): \(error)") }
      if case .job(id: "x", _) = event { break }
    }
    #expect(seen.isEmpty, "\(seen)")
    #expect(store["x"] != nil)
  }

  /// Nor a save in progress as `remove(id:)` came, whose loop ran the deletion (a failed one,
  /// which `remove(id:)` throws): the save, which saved fine, reported the deletion's failure
  /// (the review of b4762b5, helper 40).
  @Test func aSaveInProgressReportsNoSaveFailureForTheDeletionItsLoopRan() async throws {
    let store = GatedJobStore(failsDeletions: true)
    let manager = try JobManager(registry: registry, store: store)
    try manager.add(Job(CountingWork(units: 3)), id: "x")
    let entry = try #require(manager.entry(id: "x"))
    let events = manager.events
    store.blockNextSave()
    let saved = DispatchSemaphore(value: 0)
    let saver = Thread {
      manager.saveAll()
      saved.signal()
    }
    saver.start()
    store.entered.wait()
    let removal = Task { try await manager.remove(id: "x") }
    await eventually { entry.removalWaiterCountForTesting == 1 }
    store.release.signal()
    await #expect(throws: JobError.self) { try await removal.outcome }  // the deletion failed: told here
    saved.wait()  // saveAll() returned: whatever it reported is in the stream
    try manager.add(Job(ScriptedWork(runs: [[]])), id: "x")  // a sentinel: .added comes after
    var seen: [String] = []
    for await event in events {
      if case .saveFailed(let id, let error) = event { seen.append("saveFailed \(id): \(error)") }
      if case .added(id: "x") = event { break }
    }
    #expect(seen.isEmpty, "\(seen)")
  }
}

/// A store over a copy of another memory store's records, taken at its creation.
final class RecordsCopy: JobStore, Sendable {
  let records: [JobStoreRecord]
  init(_ store: MemoryJobStore) throws { records = try store.loadAll() }
  func loadAll() throws -> [JobStoreRecord] { records }
  func save(_ data: Data, id: String) throws {}
  func remove(id: String) throws {}
  func setAside(id: String) throws {}
}

extension Result {
  var error: Failure? {
    if case .failure(let error) = self { error } else { nil }
  }
}

/// A memory store whose next save, once armed, blocks its thread until `release` is signalled,
/// and whose deletions fail when `failsDeletions`.
final class GatedJobStore: JobStore, @unchecked Sendable {
  private let records = Mutex<[String: Data]>([:])
  private let armed = Mutex(false)
  let failsDeletions: Bool
  let entered = DispatchSemaphore(value: 0)
  let release = DispatchSemaphore(value: 0)

  init(failsDeletions: Bool = false) { self.failsDeletions = failsDeletions }

  func blockNextSave() { armed.withLock { $0 = true } }
  subscript(id: String) -> Data? { records.withLock { $0[id] } }

  func loadAll() throws -> [JobStoreRecord] {
    records.withLock { $0.map { JobStoreRecord(id: $0.key, data: .success($0.value)) } }
  }
  func save(_ data: Data, id: String) throws {
    let block = armed.withLock { armed in defer { armed = false }; return armed }
    if block {
      entered.signal()
      release.wait()
    }
    records.withLock { $0[id] = data }
  }
  func remove(id: String) throws {
    if failsDeletions { throw JobError(code: .storeFailed, message: "the disk is read-only") }
    records.withLock { _ = $0.removeValue(forKey: id) }
  }
  func setAside(id: String) throws {}
}

/// A weak reference that can be handed around.
final class WeakReference<Object: AnyObject>: @unchecked Sendable {
  weak var value: Object?
  init(_ value: Object) { self.value = value }
}
