import ExampleServices
import Foundation
import LoadableKit
import Synchronization
import Testing

/// The playgrounds' simulated job service: its jobs go on by its clock, persist in its directory,
/// and every request is logged.
@Suite("Server-side jobs: the example job service", .timeLimit(.minutes(1)))
struct ServerJobServiceTests {
  /// The service's clock, moved by the test.
  final class Now: Sendable {
    let seconds = Mutex<Double>(0)
    let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
    var date: Date { start.addingTimeInterval(seconds.withLock(owner: self) { $0 }) }
    func advance(_ delta: Double) { seconds.withLock(owner: self) { $0 += delta } }
  }

  let directory = FileManager.default.temporaryDirectory.appendingPathComponent("JobService-\(UUID().uuidString)")
  let now = Now()

  func open() throws -> JobService {
    let now = self.now
    return try JobService(directory: directory, latency: .zero, now: { now.date })
  }

  @Test func aJobGoesOnByTheClockAndAnotherInstanceSeesItFinished() async throws {
    defer { try? FileManager.default.removeItem(at: directory) }
    let service = try open()
    let id = try await service.submit(JobRequest(task: "GenerateOfflineMap", parameters: ["area": "Redlands"]))
    #expect(id == "j1")
    let submitted = try await service.status(ofJob: id, messagesAfter: 0)
    #expect(submitted.state == .submitted)
    #expect(submitted.messages.map(\.text) == ["Submitted: Generate offline map of Redlands"])

    now.advance(2)  // half of its 4 seconds
    let half = try await service.status(ofJob: id, messagesAfter: 1)
    #expect(half.state == .executing)
    #expect(half.progress == 0.5)
    #expect(half.messages.map(\.sequence) == [2, 3], "only the messages after 1")
    await #expect(throws: ServiceError.self) { try await service.result(ofJob: id) }

    now.advance(3600)
    let later = try open()  // another process, on the same directory
    let done = try await later.status(ofJob: id, messagesAfter: 3)
    #expect(done.state == .succeeded)
    #expect(done.messages.map(\.text) == [
      "Packaging the Trails layer", "Writing the mobile map package", "Succeeded: wrote offline-map.mmpk",
    ])
    let result = try await later.result(ofJob: id)
    #expect(result == JobResult(jobID: id, task: "GenerateOfflineMap", file: "offline-map.mmpk", bytes: 18_874_368, parameters: ["area": "Redlands"]))
    #expect(later.requestLog == [
      "submit GenerateOfflineMap → j1", "status j1 → submitted", "status j1 → executing",
      "result j1 → 409 Conflict: the job has not succeeded", "status j1 → succeeded", "result j1 → offline-map.mmpk",
    ])
    #expect(later.requests("result") == 2)
  }

  @Test func cancelStopsACancellableJobAndRefusesTheOthers() async throws {
    defer { try? FileManager.default.removeItem(at: directory) }
    let service = try open()
    let map = try await service.submit(JobRequest(task: "GenerateOfflineMap"))
    let tiles = try await service.submit(JobRequest(task: "ExportTileCache"))
    now.advance(1)
    let answer = try await service.cancel(job: map)
    #expect(answer.state == .cancelled)
    #expect(answer.messages.last?.text == "Cancelled at the client's request")
    let refusal = await #expect(throws: ServerJobError.self) { try await service.cancel(job: tiles) }
    #expect(refusal == .cancelNotSupported)
    now.advance(3600)
    #expect(try await service.status(ofJob: map, messagesAfter: 0).state == .cancelled, "a cancelled job stays cancelled")
    #expect(try await service.status(ofJob: tiles, messagesAfter: 0).state == .succeeded, "the refused one went on")
    #expect(try await service.cancel(job: tiles).state == .succeeded, "cancelling a finished job changes nothing")
    await #expect(throws: ServerJobError.jobNotFound) { try await service.status(ofJob: "j99", messagesAfter: 0) }
  }

  @Test func anOutageFailsRequestsWith503AndLogsThem() async throws {
    defer { try? FileManager.default.removeItem(at: directory) }
    let service = try open()
    let id = try await service.submit(JobRequest(task: "GenerateOfflineMap"))
    service.server.scheduleOutage(after: 0, failing: 1)
    await #expect(throws: ServiceError.unavailable("jobs/\(id)")) { try await service.status(ofJob: id, messagesAfter: 0) }
    #expect(try await service.status(ofJob: id, messagesAfter: 0).state == .submitted)
    #expect(service.requestLog.suffix(2) == ["status j1 → 503 Service Unavailable", "status j1 → submitted"])
  }
}
