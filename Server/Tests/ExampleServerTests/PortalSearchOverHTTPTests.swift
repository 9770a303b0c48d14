import ExampleServer
import ExampleServices
import Foundation
import Testing

/// The portal's paged search over HTTP (`GET /portal/sharing/rest/search?q=…&start=…&num=…`):
/// ArcGIS REST's paging fields, and the staging every route has.
@Suite("Portal search over HTTP", .timeLimit(.minutes(1)))
struct PortalSearchOverHTTPTests {
  static let path = "/portal/sharing/rest/search"

  /// `total`, `start`, `num` and `nextStart`.
  static func paging(_ response: PortalSearchResponse) -> [Int] {
    [response.total, response.start, response.num, response.nextStart]
  }

  @Test func theFirstAMiddleAndTheLastPage() async throws {
    try await withServer { _, url in
      let portal = RedlandsServices(latency: .zero, server: url).portal
      let first = try await portal.search("parks", start: 1, num: 5)
      #expect(Self.paging(first) == [13, 1, 5, 6])
      #expect(
        first.results.map(\.title) == ["Brookside Park", "Caroline Park", "Ford Park", "Hillside Memorial", "Jennie Davis Park"])
      let middle = try await portal.search("parks", start: first.nextStart, num: 5)
      #expect(Self.paging(middle) == [13, 6, 5, 11])
      #expect(middle.results.map(\.title) == ["Key Park", "Prospect Park", "Redlands Bowl", "Smiley Park", "Sylvan Park"])
      let last = try await portal.search("parks", start: middle.nextStart, num: 5)
      #expect(Self.paging(last) == [13, 11, 5, -1])
      #expect(last.results.map(\.title) == ["Texonia Park", "Crafton Hills", "San Timoteo Nature Sanctuary"])
      // Every page's items are distinct: the pages do not overlap.
      #expect(Set((first.results + middle.results + last.results).map(\.id)).count == 13)
    }
  }

  @Test func theAnswerHasArcGISRESTsFieldNames() async throws {
    try await withServer { _, url in
      let query = [
        URLQueryItem(name: "q", value: "parks"), URLQueryItem(name: "start", value: "11"),
        URLQueryItem(name: "num", value: "5"),
      ]
      let data = try await HTTPClient(baseURL: url).get(Self.path, query: query)
      let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
      #expect(json["total"] as? Int == 13)
      #expect(json["start"] as? Int == 11)
      #expect(json["num"] as? Int == 5)
      #expect(json["nextStart"] as? Int == -1)
      #expect((json["results"] as? [Any])?.count == 3)
    }
  }

  @Test func anOutageAnswers503AndTheNextRequestIsAnswered() async throws {
    try await withServer { server, url in
      let portal = RedlandsServices(latency: .zero, server: url).portal
      portal.server.scheduleOutage(after: 1, failing: 1)
      _ = try await portal.search("parks", start: 1, num: 5)
      await #expect {
        try await portal.search("parks", start: 6, num: 5)
      } throws: { error in
        (error as? ServiceError)?.code == 503
      }
      #expect(try await portal.search("parks", start: 6, num: 5).nextStart == 11, "after the outage")
      let entries = await server.log.waitForOutcomes(containing: "rest/search", count: 3)
      let statuses = entries.map { entry -> Int? in
        if case .answered(let status, _) = entry.outcome { status } else { nil }
      }
      #expect(statuses == [200, 503, 200])
    }
  }

  @Test func aHeldSearchIsAnsweredOnceReleased() async throws {
    try await withServer { server, url in
      let portal = RedlandsServices(latency: .zero, server: url).portal
      portal.server.holdRequests(after: 0)
      let held = Task { try await portal.search("parks", start: 1, num: 5) }
      await portal.server.waitUntilRequestHeld()
      #expect(await server.log.waitForRequest(containing: "rest/search").map(\.held) == [true])
      #expect(server.log.entries.filter { $0.target.contains("rest/search") }.map(\.outcome) == [nil], "held: no answer yet")
      try await portal.server.releaseHeldRequests()
      #expect(try await held.value.results.count == 5)
    }
  }

  @Test func aPageOutOfRangeIsABadRequest() async throws {
    try await withServer { _, url in
      let portal = RedlandsServices(latency: .zero, server: url).portal
      await #expect {
        try await portal.search("parks", start: 0, num: 5)
      } throws: { error in
        (error as? ServiceError)?.code == 400
      }
    }
  }
}
