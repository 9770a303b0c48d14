import ExampleServer
import ExampleServices
import Foundation
import Testing

/// A stalled network over HTTP (`SimulatedServer.holdRequests(after:)`, header `X-Hold`): the
/// server holds the requests after the stall until they are released, and a client that goes
/// away meanwhile is logged as such.
@Suite("Held requests over HTTP", .timeLimit(.minutes(1)))
struct HeldRequestsOverHTTPTests {
  static let mapService = "Basemaps/RedlandsTopographic/MapServer"

  @Test func theRequestsAfterTheStallWaitForTheRelease() async throws {
    try await withServer { server, url in
      let gis = RedlandsServices(latency: .zero, server: url).gis
      gis.server.holdRequests(after: 1)
      _ = try await gis.tile(mapService: Self.mapService, TileKey(level: 1, row: 0, column: 0))
      let held = Task { try await gis.tile(mapService: Self.mapService, TileKey(level: 1, row: 0, column: 1)) }
      await gis.server.waitUntilRequestHeld()
      let entries = await server.log.waitForRequest(containing: "/tile/1/0/1")
      #expect(entries.map(\.held) == [true])
      #expect(server.log.entries.last?.outcome == nil, "held: no answer yet")
      try await gis.server.releaseHeldRequests()
      #expect(try await held.value.isEmpty == false)
      let answered = await server.log.waitForOutcomes(containing: "/tile/1/0/1")
      #expect(answered.map { entry -> Int? in if case .answered(let status, _) = entry.outcome { status } else { nil } } == [200])
      // Once released, the stall is over: the next request is not held.
      _ = try await gis.tile(mapService: Self.mapService, TileKey(level: 1, row: 1, column: 0))
      #expect(await server.log.waitForOutcomes(containing: "/tile/1/1/0").map(\.held) == [false])
    }
  }

  @Test func aHeldRequestWhoseTaskIsCancelledIsLoggedAsTheClientGoingAway() async throws {
    try await withServer { server, url in
      let gis = RedlandsServices(latency: .zero, server: url).gis
      gis.server.holdRequests(after: 0)
      let held = Task { try await gis.tile(mapService: Self.mapService, TileKey(level: 1, row: 0, column: 0)) }
      await server.log.waitForRequest(containing: "/tile/1/0/0")
      held.cancel()
      await #expect(throws: CancellationError.self) { try await held.value }
      #expect(await server.log.waitForOutcomes(containing: "/tile/1/0/0").map(\.outcome) == [.clientWentAway])
      try await gis.server.releaseHeldRequests()
    }
  }
}
