import ExampleServer
import ExampleServices
import Foundation
import LoadableKit
import Testing

/// The job service over HTTP: `JobServiceClient` against the server's `/gp` routes on loopback.
///
/// Each test is bounded by the suite's time limit. Job progress follows the server's clock, which
/// the tests move with `POST /admin/jobs/clock` rather than waiting, so no test depends on timing.
@Suite("Jobs over HTTP", .timeLimit(.minutes(1)))
struct JobsOverHTTPTests {
  static func client(_ url: URL) throws -> JobServiceClient {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-client-\(UUID().uuidString)")
    return try JobServiceClient(baseURL: url, directory: directory, latency: .zero)
  }

  @Test func submitStatusAndResultGoOverTheWire() async throws {
    try await withServer { server, url in
      let client = try Self.client(url)
      let id = try await client.submit(JobRequest(task: "GenerateOfflineMap", parameters: ["area": "Downtown Redlands"]))
      #expect(id == "j1")
      let first = try await client.status(ofJob: id, messagesAfter: 0)
      #expect(first.messages.first?.text == "Submitted: Generate offline map of Downtown Redlands")
      await #expect(throws: ServiceError.self) { try await client.result(ofJob: id) }  // 409: not done yet

      try await client.setServerClock(aheadBy: 3600)  // an hour later, on the server
      let done = try await client.status(ofJob: id, messagesAfter: 1)
      #expect(done.state == .succeeded)
      #expect(done.progress == 1)
      #expect(done.messages.map(\.sequence) == [2, 3, 4, 5, 6], "only the messages after 1")
      let result = try await client.result(ofJob: id)
      #expect(result == JobResult(
        jobID: "j1", task: "GenerateOfflineMap", file: "offline-map.mmpk", bytes: 18_874_368,
        parameters: ["area": "Downtown Redlands"]))
      #expect(client.requestLog.first == "submit GenerateOfflineMap → j1")
      #expect(client.requests("result") == 2)

      let targets = server.log.entries.map { "\($0.method) \($0.target) → \($0.outcome.map { "\($0)" } ?? "")" }
      #expect(targets.first == "POST /gp/GenerateOfflineMap/submitJob?area=Downtown%20Redlands → 200, 14 bytes")
      #expect(targets.contains { $0.hasPrefix("GET /gp/jobs/j1/result → 409") })
    }
  }

  @Test func jobErrorsComeBackTyped() async throws {
    try await withServer { _, url in
      let client = try Self.client(url)
      await #expect(throws: ServerJobError.jobNotFound) { try await client.status(ofJob: "j42", messagesAfter: 0) }
      let id = try await client.submit(JobRequest(task: "ExportTileCache"))
      await #expect(throws: ServerJobError.cancelNotSupported) { try await client.cancel(job: id) }
      let unknownTask = await #expect(throws: ServiceError.self) { try await client.submit(JobRequest(task: "Nope")) }
      #expect(unknownTask?.code == 404)
      #expect(try await client.status(ofJob: id, messagesAfter: 0).state != .cancelled, "nothing was lost")
    }
  }

  @Test func anOutageAnswers503WithRetryAfter() async throws {
    try await withServer { _, url in
      let client = try Self.client(url)
      _ = try await HTTPClient(baseURL: url).send("POST", "/admin/staging", query: [
        URLQueryItem(name: "service", value: "gp"), URLQueryItem(name: "down", value: "true"),
        URLQueryItem(name: "retryAfter", value: "1"),
      ])
      let error = await #expect(throws: ServiceError.self) { try await client.submit(JobRequest(task: "GenerateOfflineMap")) }
      #expect(error?.code == 503)
      #expect(error?.retryAfter == .seconds(1))
      #expect(client.requestLog == ["submit GenerateOfflineMap → 503 Service Unavailable"])
    }
  }

  @Test func cancellingAJobClosesTheStatusRequestOnTheWire() async throws {
    try await withServer { server, url in
      let client = try Self.client(url)
      let key = UUID().uuidString
      RemoteOfflineMap.clients.withLock { $0[key] = client }
      defer { _ = RemoteOfflineMap.clients.withLock { $0.removeValue(forKey: key) } }
      client.server.slowDown("jobs/", by: .seconds(600))  // the server holds the status requests
      let job = Job(RemoteOfflineMap(key: key), options: JobOptions())
      _ = job.start()
      await server.log.waitForRequest(containing: "/gp/jobs/j1?")
      client.server.slowDown("jobs/", by: nil)  // the cancel request is answered at once
      #expect(await job.cancel())
      let held = await server.log.waitForOutcomes(containing: "/gp/jobs/j1?")
      #expect(held.map(\.outcome) == [.clientWentAway], "the server saw the client go before it answered")
      #expect(client.requestLog.contains("status j1 → CancellationError"))
      #expect(client.requestLog.contains("cancel j1 → cancelled"), "the runner asked the server to cancel")
      #expect(job.status == .failed)
      #expect(job.error is CancellationError)
    }
  }
}

/// A job that generates an offline map on the job service of the test's server.
struct RemoteOfflineMap: JobWork {
  static let kind = "org.loadablekit.server-tests.remote-offline-map"
  /// The clients of the tests that run at the same time, by key.
  static let clients = Locked<[String: JobServiceClient]>([:])
  var key: String

  func run(in context: JobContext<ServerJobCheckpoint>) async throws -> JobResult {
    guard let client = Self.clients.withLock({ $0[key] }) else { throw CancellationError() }
    let runner = ServerJobRunner(
      service: client, pollSchedule: .exponential(initial: .milliseconds(10), maximum: .milliseconds(10)))
    return try await runner.run(submitting: JobRequest(task: "GenerateOfflineMap"), in: context)
  }
}
