import ExampleServer
import ExampleServices
import Foundation
import LoadableKit
import Testing

/// MapViewer's first two steps — open the map during a portal outage, then retry once the portal
/// is back — over HTTP and in-process: the same status trace.
@Suite("An outage over HTTP", .timeLimit(.minutes(1)))
struct OutageStoryOverHTTPTests {
  /// basemap ── item ── portal, and a layer ── table ── item ── portal, as in MapViewer.
  private static func story(_ services: RedlandsServices) async -> [String] {
    let portal = AsyncLoadable { try await services.portal.portalInfo() }.named("portal")
    func item(_ id: String, _ name: String) -> AsyncLoadable<PortalItemInfo> {
      let item = AsyncLoadable { try await services.portal.item(id: id) }.named(name)
      item.addDependency(portal)
      return item
    }
    let basemapItem = item(RedlandsItems.topographic, "Topographic item")
    let basemap = AsyncLoadable {
      try await services.gis.mapService(url: try await basemapItem.fetchIfNeeded().url ?? "")
    }.named("basemap")
    basemap.addDependency(basemapItem)
    let trailsItem = item(RedlandsItems.trails, "Trails item")
    let trails = AsyncLoadable {
      try await services.gis.featureLayer(url: try await trailsItem.fetchIfNeeded().url ?? "", layerID: 0)
    }.named("Trails table")
    trails.addDependency(trailsItem)
    let map = AsyncLoadable { try await basemap.fetchIfNeeded().spatialReference.wkid }.named("map")
    map.addDependency(basemap)
    map.addDependency(trails, kind: .incidental)

    let trace = StatusTrace()
    trace.watch(map)
    services.portal.server.isDown = true
    _ = try? await map.load()
    _ = try? await trails.load()
    var lines = await trace.lines([map])
    services.portal.server.isDown = false
    _ = try? await map.retryLoad()
    _ = try? await trails.load()
    lines += await trace.lines([map])
    return lines
  }

  @Test func theStatusTraceIsTheSameOverHTTP() async throws {
    let inProcess = await Self.story(RedlandsServices(latency: .milliseconds(2)))
    let overHTTP = try await withServer { server, url in
      let lines = await Self.story(RedlandsServices(latency: .milliseconds(2), server: url))
      let outcomes = server.log.entries.filter { $0.target.hasSuffix("portals/self") }.map(\.outcome)
      #expect(outcomes.first == .answered(status: 503, bytes: 39), "the server answered the outage")
      #expect(outcomes.last == .answered(status: 200, bytes: 136))
      return lines
    }
    #expect(inProcess.contains { $0.contains("503 Service Unavailable") })
    #expect(inProcess.contains { $0.contains("404 Not Found") })
    #expect(overHTTP == inProcess)
  }
}
