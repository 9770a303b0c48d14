import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A store that lists its records newest first (by first save): a manager that restored jobs in
/// the store's order would restore them reversed.
final class ReversingJobStore: JobStore, @unchecked Sendable {
  private let records = Mutex<[(id: String, data: Data)]>([])

  func loadAll() throws -> [JobStoreRecord] {
    records.withLock(owner: self) { $0.reversed().map { JobStoreRecord(id: $0.id, data: .success($0.data)) } }
  }
  func save(_ data: Data, id: String) throws {
    records.withLock(owner: self) { records in
      if let index = records.firstIndex(where: { $0.id == id }) {
        records[index].data = data
      } else {
        records.append((id, data))
      }
    }
  }
  func remove(id: String) throws { records.withLock(owner: self) { $0.removeAll { $0.id == id } } }
  func setAside(id: String) throws {}

  subscript(id: String) -> Data? { records.withLock(owner: self) { $0.first { $0.id == id }?.data } }
}

@Suite("Jobs: what a restore brings back", .timeLimit(.minutes(1)))
struct JobsRestoreTests {
  let registry = JobRegistry(CountingWork.self, ScriptedWork.self)

  /// Jobs come back in the order they were added, whatever order the store lists them in, and
  /// a job added after a restore comes after the restored ones.
  @Test func restoreKeepsTheOrderJobsWereAddedIn() async throws {
    let store = ReversingJobStore()
    var added: [String] = []
    do {
      let manager = try JobManager(registry: registry, store: store)
      for units in 1...5 { added.append(try manager.add(Job(CountingWork(units: units))).id) }
      try await manager.remove(id: added.remove(at: 2))
      #expect(manager.jobs.map(\.id) == added)
    }
    do {
      let manager = try JobManager(registry: registry, store: store)
      #expect(manager.jobs.map(\.id) == added)
      added.append(try manager.add(Job(CountingWork(units: 6))).id)
      #expect(manager.jobs.map(\.id) == added)
    }
    let manager = try JobManager(registry: registry, store: store)
    #expect(manager.jobs.map(\.id) == added)
  }

  /// Records written before the order was stored (no `addedSequence`) still load: after the
  /// ordered ones, in the store's order; they are stored again with their place, so it holds at
  /// the next restore too.
  @Test func recordsWithoutAnOrderComeAfterInTheStoresOrder() async throws {
    let store = ReversingJobStore()
    // Two old records, listed "old-2" first (the store lists the newest first).
    try store.save(try Job(CountingWork(units: 1)).toJSON(), id: "old-1")
    try store.save(try Job(CountingWork(units: 2)).toJSON(), id: "old-2")
    var ordered: [String] = []
    do {
      let manager = try JobManager(registry: registry, store: store)
      #expect(manager.jobs.map(\.id) == ["old-2", "old-1"])
      ordered = ["old-2", "old-1"]
      ordered.append(try manager.add(Job(CountingWork(units: 3))).id)
    }
    let old = try #require(store["old-1"])
    #expect(try JSONSerialization.jsonObject(with: old) as? [String: Any] != nil)
    let manager = try JobManager(registry: registry, store: store)
    #expect(manager.restoreProblems.isEmpty)
    #expect(manager.jobs.map(\.id) == ordered)
  }

  /// A job's own JSON form (`toJSON()`) holds no manager order; the manager's records do.
  @Test func theOrderIsInTheManagersRecordsOnly() throws {
    let store = MemoryJobStore()
    let manager = try JobManager(registry: registry, store: store)
    let job = Job(CountingWork(units: 1))
    let id = try manager.add(job).id
    #expect(store.object(id)?["addedSequence"] != nil)
    #expect(try JSONSerialization.jsonObject(with: job.toJSON()) as? [String: Any] != nil)
    #expect((try JSONSerialization.jsonObject(with: job.toJSON()) as? [String: Any])?["addedSequence"] == nil)
  }
}

