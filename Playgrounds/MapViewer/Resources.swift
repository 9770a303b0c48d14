// The loadable resources of a map viewer, written as AsyncLoadable subclasses: each one knows
// what it needs (its dependencies) and how to load itself (performLoad).
import ExampleServices
import LoadableKit

/// A portal. Loads its own description; needs nothing else.
final class Portal: AsyncLoadable<PortalInfo>, @unchecked Sendable {
  let service: PortalService

  init(service: PortalService) {
    self.service = service
    super.init()
  }

  override func performLoad() async throws -> PortalInfo {
    try await service.portalInfo()
  }
}

/// An item of a portal. It cannot load without its portal: a required dependency, loaded (and
/// retried, and refreshed) before `performLoad()` runs.
final class PortalItem: AsyncLoadable<PortalItemInfo>, @unchecked Sendable {
  let portal: Portal
  let id: String

  init(portal: Portal, id: String) {
    self.portal = portal
    self.id = id
    super.init()
    addDependency(portal)
  }

  override func performLoad() async throws -> PortalItemInfo {
    try await portal.service.item(id: id)
  }
}

/// A tiled basemap from a map service portal item.
final class Basemap: AsyncLoadable<MapServiceInfo>, @unchecked Sendable {
  let item: PortalItem
  let server: GISServer

  init(item: PortalItem, server: GISServer) {
    self.item = item
    self.server = server
    super.init()
    addDependency(item)
  }

  override func performLoad() async throws -> MapServiceInfo {
    // `loadDependency` returns the item's content: the service URL is in it.
    let item = try await loadDependency(self.item)
    return try await server.mapService(url: item.url ?? "")
  }
}

/// A feature table: one layer of the feature service behind a portal item. Its content is the
/// layer's metadata (fields, scales) and its features.
final class FeatureTable: AsyncLoadable<FeatureLayerInfo>, @unchecked Sendable {
  let item: PortalItem
  let layerID: Int
  let server: GISServer

  init(item: PortalItem, layerID: Int, server: GISServer) {
    self.item = item
    self.layerID = layerID
    self.server = server
    super.init()
    addDependency(item)
  }

  override func performLoad() async throws -> FeatureLayerInfo {
    let item = try await loadDependency(self.item)
    return try await server.featureLayer(url: item.url ?? "", layerID: layerID)
  }
}

/// A feature layer draws a feature table. Its scale range comes from the service, unless the
/// app set it first: `minScale` and `maxScale` are `Overridable`.
final class FeatureLayer: AsyncLoadable<FeatureLayer.Info>, @unchecked Sendable {
  struct Info: Sendable {
    var name: String
    var geometryType: String
    var featureCount: Int
  }

  let featureTable: FeatureTable
  /// The layer is hidden when zoomed out beyond this scale. Set it before loading to override
  /// the service's value.
  let minScale = Overridable<Double>(0)
  /// The layer is hidden when zoomed in beyond this scale.
  let maxScale = Overridable<Double>(0)

  init(featureTable: FeatureTable) {
    self.featureTable = featureTable
    super.init()
    addDependency(featureTable)
  }

  override func performLoad() async throws -> Info {
    let table = try await loadDependency(featureTable)
    minScale.setLoadedValue(table.minScale)  // an override set by the app still wins
    maxScale.setLoadedValue(table.maxScale)
    return Info(name: table.name, geometryType: table.geometryType, featureCount: table.features.count)
  }
}

/// A map: a basemap it cannot do without, and operational layers it can.
///
/// The basemap is a required dependency: the map takes its spatial reference from it. Each
/// operational layer is an incidental dependency: loading the map starts it, but the map does not
/// wait for it, and a broken layer does not fail the map.
final class Map: AsyncLoadable<Map.Info>, @unchecked Sendable {
  struct Info: Sendable {
    var spatialReference: SpatialReference
  }

  let basemap: Basemap
  private let layers: Locked<[FeatureLayer]>

  init(basemap: Basemap, operationalLayers: [FeatureLayer]) {
    self.basemap = basemap
    layers = Locked(operationalLayers)
    super.init()
    addDependency(basemap)
    for layer in operationalLayers {
      addDependency(layer, kind: .incidental)
    }
  }

  var operationalLayers: [FeatureLayer] { layers.withLock { $0 } }

  /// Adds a layer on top. The map's next load, retry or refresh starts it too.
  func addOperationalLayer(_ layer: FeatureLayer) {
    layers.withLock { $0.append(layer) }
    addDependency(layer, kind: .incidental)
  }

  override func performLoad() async throws -> Info {
    let basemap = try await loadDependency(basemap)
    return Info(spatialReference: basemap.spatialReference)
  }
}
