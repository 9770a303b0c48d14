/// What `/sharing/rest/portals/self` says about a portal.
public struct PortalInfo: Codable, Sendable, Hashable {
  public var name: String
  public var organization: String
  public var url: String
  public var currentVersion: String
}

/// A portal item: a web map, a feature service, a map service…
public struct PortalItemInfo: Codable, Sendable, Hashable {
  public var id: String
  public var title: String
  public var type: String
  public var owner: String
  public var snippet: String
  /// The service behind the item, for service items.
  public var url: String?
  /// How many times the item was viewed. Every request for the item counts one more view, so a
  /// refreshed item has new content.
  public var numViews: Int
}

/// The data of a web map item: a basemap and operational layers, each from a portal item.
public struct WebMapDefinition: Codable, Sendable, Hashable {
  public struct Basemap: Codable, Sendable, Hashable {
    public var title: String
    public var itemId: String
  }

  public struct OperationalLayer: Codable, Sendable, Hashable {
    public var title: String
    public var itemId: String
    public var layerId: Int
  }

  public struct Viewpoint: Codable, Sendable, Hashable {
    public var x: Double
    public var y: Double
    public var scale: Double
  }

  public var baseMap: Basemap
  public var operationalLayers: [OperationalLayer]
  public var initialViewpoint: Viewpoint
}

/// The item ids of the Redlands portal's content.
public enum RedlandsItems {
  /// "Redlands Topographic", a map service used as a basemap.
  public static let topographic = "0c4a8b2f7e1d4c39a6b5e8f1d2c3a4b5"
  /// "Parks", a feature service.
  public static let parks = "5e2d9a7c1b8f4e6d9c0a3b2e1f4d5c6a"
  /// "Trails", a feature service whose service no longer exists (`404 Not Found`).
  public static let trails = "9b1f3e5d7c2a4b6e8d0f1a3c5e7b9d2f"
  /// "Fire Hydrants", a feature service.
  public static let hydrants = "d7e3c1a9b5f24d8e6c0b2a4f6e8d1c3b"
  /// "Redlands Parks and Trails", a web map of the three layers over the topographic basemap.
  public static let parksAndTrailsMap = "a3f5c7e9b1d24f6a8c0e2b4d6f8a1c3e"
}

/// The City of Redlands portal (simulated, from `Data/portal.json`).
public final class PortalService: Sendable {
  private struct Document: Decodable {
    var portal: PortalInfo
    var items: [PortalItemInfo]
    var itemData: [String: WebMapDefinition]
    var searchItems: [PortalSearchItem]
  }

  /// The network in front of the portal: latency, outages.
  public let server: SimulatedServer
  private let document: Document
  private let views: Locked<[String: Int]>
  /// What ``search(_:start:num:)`` searches, in order.
  var searchItems: [PortalSearchItem] { document.searchItems }

  init(server: SimulatedServer) {
    self.server = server
    document = ExampleData.bundled(Document.self, from: "portal.json")
    views = Locked(Dictionary(uniqueKeysWithValues: document.items.map { ($0.id, $0.numViews) }))
  }

  /// `GET /sharing/rest/portals/self`
  public func portalInfo() async throws -> PortalInfo {
    try await server.respondJSON(to: "/sharing/rest/portals/self") { document.portal }
  }

  /// `GET /sharing/rest/content/items/<id>`
  public func item(id: String) async throws -> PortalItemInfo {
    let path = "/sharing/rest/content/items/\(id)"
    return try await server.respondJSON(to: path) {
      guard var item = document.items.first(where: { $0.id == id }) else { throw ServiceError.notFound(path) }
      item.numViews = views.withLock { views in
        views[id, default: 0] += 1
        return views[id]!
      }
      return item
    }
  }

  /// `GET /sharing/rest/content/items/<id>/data` for a web map item.
  public func webMap(itemID id: String) async throws -> WebMapDefinition {
    let path = "/sharing/rest/content/items/\(id)/data"
    return try await server.respondJSON(to: path) {
      guard let data = document.itemData[id] else { throw ServiceError.notFound(path) }
      return data
    }
  }
}
