import ExampleServer
import ExampleServices
import Foundation
import LoadableKit
import Testing

/// A tile download as a job: one tile, from the server at `baseURL`.
private struct DownloadTile: JobWork {
  static let kind = "org.loadablekit.server-tests.download-tile"
  var baseURL: URL
  var headers: [String: String]

  func run(in context: JobContext<Int>) async throws -> Data {
    try await context.pausePoint()
    let client = HTTPClient(baseURL: baseURL)
    return try await client.get(
      "/gis/Basemaps/RedlandsTopographic/MapServer/tile/1/0/0", headers: headers)
  }
}

@Suite("Failures over HTTP", .timeLimit(.minutes(1)))
struct FailuresOverHTTPTests {
  static let portal = "/portal/sharing/rest/portals/self"

  @Test func aCancelledJobCancelsItsTileDownloadOnTheWire() async throws {
    try await withServer { server, url in
      let job = Job(DownloadTile(baseURL: url, headers: ["X-Latency-Ms": "600000"]))
      job.start()
      await server.log.waitForRequest(containing: "/tile/")
      #expect(await job.cancel())
      await #expect(throws: CancellationError.self) { try await job.output }
      let entries = await server.log.waitForOutcomes(containing: "/tile/")
      #expect(entries.map(\.outcome) == [.clientWentAway], "the job's cancel reached the socket")
    }
  }

  @Test func aTileDownloadWithoutCancellationIsAnswered() async throws {
    try await withServer { server, url in
      let job = Job(DownloadTile(baseURL: url, headers: [:]))
      job.start()
      let tile = try await job.output
      #expect(tile.starts(with: Data("Redlands Topographic tile 1/0/0".utf8)))
      let entries = await server.log.waitForOutcomes(containing: "/tile/")
      #expect(entries.map(\.outcome) == [.answered(status: 200, bytes: tile.count)])
    }
  }

  @Test func a503WithRetryAfterIsRetriedAfterTheDelayAskedFor() async throws {
    try await withServer { server, url in
      let client = HTTPClient(baseURL: url)
      let tries = Counter()
      let portal = AsyncLoadable<PortalInfo> {
        // The first try meets an outage that asks for one second.
        let headers = tries.next() == 1 ? ["X-Status": "503", "X-Retry-After": "1"] : [:]
        return try await client.get(PortalInfo.self, Self.portal, headers: headers)
      }
      portal.loadOptions = LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .milliseconds(10), jitter: 0))
      let clock = ContinuousClock()
      let started = clock.now
      let info = try await portal.fetch()
      let elapsed = clock.now - started
      #expect(info.name.contains("Redlands"))
      #expect(elapsed >= .seconds(1), "retried after the delay the server asked for, not the 10 ms backoff")
      #expect(elapsed < .seconds(20), "bounded")
      let entries = await server.log.waitForOutcomes(containing: "portals/self", count: 2)
      #expect(entries.map(\.outcome?.status) == [503, 200])
    }
  }

  @Test func aServerThatClosesMidBodyGivesATypedErrorAndARetryRecovers() async throws {
    try await withServer { server, url in
      let (portal, fault) = Self.portal(at: url, fault: "cut-off")
      let error = await #expect(throws: NetworkError.self) { try await portal.load() }
      #expect(error?.code == .connectionLost, Comment(rawValue: "\(String(describing: error))"))
      let entries = await server.log.waitForOutcomes(containing: "portals/self")
      guard case .cutOff(let sent, let total)? = entries.first?.outcome else {
        Issue.record("expected a cut-off answer, got \(entries)")
        return
      }
      #expect(sent < total)
      fault.withLock { $0 = nil }
      try await portal.retryLoad()
      #expect(portal.content?.name.contains("Redlands") == true)
    }
  }

  @Test func malformedJSONGivesATypedErrorAndARetryRecovers() async throws {
    try await withServer { _, url in
      let (portal, fault) = Self.portal(at: url, fault: "malformed-json")
      let error = await #expect(throws: NetworkError.self) { try await portal.load() }
      #expect(error?.code == .malformedResponse)
      fault.withLock { $0 = nil }
      try await portal.retryLoad()
      #expect(portal.loadStatus == .loaded)
    }
  }

  /// A portal loadable whose requests ask the server for `fault` until the lock holds `nil`.
  private static func portal(at url: URL, fault: String) -> (AsyncLoadable<PortalInfo>, Locked<String?>) {
    let client = HTTPClient(baseURL: url)
    let fault = Locked<String?>(fault)
    let portal = AsyncLoadable<PortalInfo> {
      let headers = fault.withLock { $0 }.map { ["X-Fault": $0] } ?? [:]
      return try await client.get(PortalInfo.self, Self.portal, headers: headers)
    }
    return (portal, fault)
  }

  @Test func aStatusAnswerIsAServiceError() async throws {
    try await withServer { _, url in
      let client = HTTPClient(baseURL: url)
      let error = await #expect(throws: ServiceError.self) {
        try await client.get(PortalItemInfo.self, "/portal/sharing/rest/content/items/nothing")
      }
      #expect(error?.code == 404)
    }
  }
}

private final class Counter: Sendable {
  private let value = Locked(0)
  func next() -> Int { value.withLock { $0 += 1; return $0 } }
}

extension RequestLog.Outcome {
  var status: Int? {
    if case .answered(let status, _) = self { status } else { nil }
  }
}
