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

/// Work that fails at once with the error its parameters name.
struct FailingWork: JobWork {
  enum Failure: Codable, Sendable {
    case server(code: String, message: String)
    case job(code: String, message: String)
    case foundation(domain: String, code: Int, description: String)
    case swift
  }
  static let kind = "test.failing"
  var failure: Failure

  func run(in context: JobContext<Int>) async throws -> Int {
    switch failure {
    case .server(let code, let message): throw ServerJobError(code: .init(rawValue: code), message: message)
    case .job(let code, let message): throw JobError(code: .init(rawValue: code), message: message)
    case .foundation(let domain, let code, let description):
      throw NSError(domain: domain, code: code, userInfo: [NSLocalizedDescriptionKey: description])
    case .swift: throw DiskFailure.readOnly
    }
  }
}

enum DiskFailure: Error { case full, readOnly }

@Suite("Jobs: errors that come back from a restore", .timeLimit(.minutes(1)))
struct JobsRestoredErrorTests {
  /// Runs `failure`'s job to its end, then restores it from its JSON form.
  func restoredFailure(_ failure: FailingWork.Failure) async throws -> (original: any Error, restored: any Error) {
    let job = Job(FailingWork(failure: failure))
    job.start()
    await job.waitFor(.failed)
    let original = try #require(job.error)
    let restored = try Job<FailingWork>.fromJSON(job.toJSON())
    #expect(restored.status == .failed)
    return (original, try #require(restored.error))
  }

  /// An app's `error as? ServerJobError` works after a restart.
  @Test func aServerJobErrorComesBackAsItself() async throws {
    let (_, restored) = try await restoredFailure(.server(code: "serverJobFailed", message: "job j1 failed: no space"))
    let error = try #require(restored as? ServerJobError)
    #expect(error == .serverJobFailed)
    #expect(error.message == "job j1 failed: no space")
    // A code this version does not know comes back too.
    let (_, other) = try await restoredFailure(.server(code: "quotaExceeded", message: "over quota"))
    #expect((other as? ServerJobError)?.code.rawValue == "quotaExceeded")
  }

  @Test func aJobErrorComesBackAsItself() async throws {
    let (_, restored) = try await restoredFailure(.job(code: "connectionLost", message: "lost after 10 minutes"))
    let error = try #require(restored as? JobError)
    #expect(error == .connectionLost)
    #expect(error.message == "lost after 10 minutes")
  }

  /// Other errors come back as a `JobError` that says what they were: domain, code, description.
  @Test func anotherErrorComesBackAsAJobErrorThatSaysWhatItWas() async throws {
    let (_, restored) = try await restoredFailure(
      .foundation(domain: "NSURLErrorDomain", code: -1009, description: "The Internet connection appears to be offline."))
    let error = try #require(restored as? JobError)
    #expect(error == .workFailed)
    #expect(error.originalError?.domain == "NSURLErrorDomain")
    #expect(error.originalError?.code == -1009)
    #expect(error.message.contains("The Internet connection appears to be offline."))

    let (original, swift) = try await restoredFailure(.swift)
    let swiftError = try #require(swift as? JobError)
    #expect(swiftError == .workFailed)
    #expect(swiftError.originalError?.domain == (original as NSError).domain)
    #expect(swiftError.originalError?.code == (original as NSError).code)
    #expect(swiftError.originalError?.description == "readOnly")
  }

  /// A restored job stored again (a manager re-saves what it restored) keeps what its error was.
  @Test func aRestoredErrorSurvivesASecondRoundTrip() async throws {
    let (_, restored) = try await restoredFailure(.foundation(domain: "Disk", code: 28, description: "No space left"))
    let once = try #require(restored as? JobError)
    var envelope = try #require(
      try JSONSerialization.jsonObject(with: Job(FailingWork(failure: .swift)).toJSON()) as? [String: Any])
    envelope["status"] = "failed"
    envelope["error"] = try JSONSerialization.jsonObject(with: JobJSON.encoder().encode(PersistedJobError(once)))
    let twice = try Job<FailingWork>.fromJSON(JSONSerialization.data(withJSONObject: envelope))
    let error = try #require(twice.error as? JobError)
    #expect(error.originalError == once.originalError)
    #expect(error.originalError?.domain == "Disk")
    #expect(error.originalError?.code == 28)
  }

  /// Records written before errors carried a domain still decode, as before.
  @Test func oldRecordsStillDecode() throws {
    var envelope = try #require(
      try JSONSerialization.jsonObject(with: Job(FailingWork(failure: .swift)).toJSON()) as? [String: Any])
    envelope["status"] = "failed"
    envelope["error"] = ["type": "other", "message": "DiskFailure.full"]
    let other = try Job<FailingWork>.fromJSON(JSONSerialization.data(withJSONObject: envelope))
    #expect(other.error as? JobError == .workFailed)
    #expect((other.error as? JobError)?.message == "DiskFailure.full")
    #expect((other.error as? JobError)?.originalError == nil)
    envelope["error"] = ["type": "jobError", "code": "connectionLost", "message": "lost"]
    let job = try Job<FailingWork>.fromJSON(JSONSerialization.data(withJSONObject: envelope))
    #expect(job.error as? JobError == .connectionLost)
    envelope["error"] = ["type": "cancellation", "message": "the job was cancelled"]
    #expect(try Job<FailingWork>.fromJSON(JSONSerialization.data(withJSONObject: envelope)).error is CancellationError)
  }

  /// A persisted error of a mistyped shape is a typed error, not a crash.
  @Test func aMistypedErrorIsMalformed() throws {
    var envelope = try #require(
      try JSONSerialization.jsonObject(with: Job(FailingWork(failure: .swift)).toJSON()) as? [String: Any])
    envelope["status"] = "failed"
    envelope["error"] = ["type": "other", "message": "x", "domain": "D", "numericCode": "not a number"]
    #expect(throws: JobError.malformed) { try Job<FailingWork>.fromJSON(JSONSerialization.data(withJSONObject: envelope)) }
  }
}
