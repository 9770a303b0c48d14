import ExampleServer
import ExampleServices
import Foundation
import LoadableKit
import Testing

/// Cancellation reaches the socket: the server sees the client go before it answered.
///
/// Against the real server on loopback; each test is bounded by the suite's time limit, and the
/// server holds requests with a latency far longer than it, so a test passes only if the
/// request was cancelled on the wire.
@Suite("Cancellation over HTTP", .timeLimit(.minutes(1)))
struct CancellationOverHTTPTests {
  static let held = ["X-Latency-Ms": "600000"]  // ten minutes: longer than any test may run

  @Test func cancelLoadClosesTheConnectionAndTheServerSendsNothing() async throws {
    try await withServer { server, url in
      let client = HTTPClient(baseURL: url)
      let portal = AsyncLoadable<PortalInfo> {
        try await client.get(PortalInfo.self, "/portal/sharing/rest/portals/self", headers: Self.held)
      }
      let load = Task { try await portal.load() }
      await server.log.waitForRequest(containing: "portals/self")
      portal.cancelLoad()
      await #expect(throws: CancellationError.self) { try await load.value }
      let entries = await server.log.waitForOutcomes(containing: "portals/self")
      #expect(entries.map(\.outcome) == [.clientWentAway], "the server saw the client go before it answered")
      #expect(portal.loadStatus == .failed)
      #expect(portal.loadError is CancellationError)
    }
  }

  @Test func theCancelledTaskThrowsCancellationErrorNotURLError() async throws {
    try await withServer { server, url in
      let client = HTTPClient(baseURL: url)
      let request = Task { try await client.get("/portal/sharing/rest/portals/self", headers: Self.held) }
      await server.log.waitForRequest(containing: "portals/self")
      request.cancel()
      await #expect(throws: CancellationError.self) { try await request.value }
      #expect(await server.log.waitForOutcomes(containing: "portals/self").map(\.outcome) == [.clientWentAway])
    }
  }

  @Test func aTimeoutClosesTheConnection() async throws {
    try await withServer { server, url in
      let client = HTTPClient(baseURL: url)
      let portal = AsyncLoadable<PortalInfo> {
        try await client.get(PortalInfo.self, "/portal/sharing/rest/portals/self", headers: Self.held)
      }
      portal.loadOptions = LoadOptions(timeout: .milliseconds(200))
      await #expect(throws: LoadableError.timedOut) { try await portal.load() }
      let entries = await server.log.waitForOutcomes(containing: "portals/self")
      #expect(entries.map(\.outcome) == [.clientWentAway], "the timeout cancelled the request on the wire")
    }
  }

  @Test func aClaimThatEndsCancelsTheThumbnailRequest() async throws {
    try await withServer { server, url in
      let client = HTTPClient(baseURL: url)
      let thumbnails = ContentLoader<String, Data, Int>(
        idleTimeout: nil, maximumIdleCount: 4, existingValue: { _ in nil },
        load: { id in
          let data = try await client.get(
            "/portal/sharing/rest/content/items/\(id)/info/thumbnail/thumbnail.png", headers: Self.held)
          return (data, 1)
        })
      let claim = thumbnails.begin(RedlandsItems.parks)
      await server.log.waitForRequest(containing: "thumbnail.png")
      claim.end()
      let entries = await server.log.waitForOutcomes(containing: "thumbnail.png")
      #expect(entries.map(\.outcome) == [.clientWentAway], "the last claim ending cancelled the request on the wire")
    }
  }

  /// 2,000 requests, each cancelled at one of 900 moments within its first millisecond, so that
  /// many cancels meet their answers. Each ends answered or cancelled; and none traps inside
  /// FoundationNetworking, as one in four runs of this test did while the client's session had
  /// a URL cache (see `HTTPClient`).
  @Test func requestsCancelledAroundTheirAnswersEndAnsweredOrCancelled() async throws {
    try await withServer { _, url in
      let client = HTTPClient(baseURL: url, maximumConnections: 16)
      var (answered, cancelled) = (0, 0)
      for round in 0..<100 {
        let outcomes = await withTaskGroup(of: Result<Data, any Error>.self) { group in
          for index in 0..<20 {
            let request = Task { try await client.get("/admin/ping") }
            group.addTask {
              try? await Task.sleep(for: .microseconds((index * 37 + round * 11) % 900))
              request.cancel()
              return await request.result
            }
          }
          return await group.reduce(into: []) { $0.append($1) }
        }
        for outcome in outcomes {
          switch outcome {
          case .success(let data):
            answered += 1
            #expect(String(decoding: data, as: UTF8.self) == "example-server\n")
          case .failure(let error):
            cancelled += 1
            #expect(error is CancellationError, "\(error)")
          }
        }
      }
      #expect(answered > 0 && cancelled > 0, "the cancels fall before and after answers")
    }
  }
}
