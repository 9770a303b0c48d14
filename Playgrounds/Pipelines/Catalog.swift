import ExampleServices
import LoadableKit

/// What a layer list shows about a feature layer.
struct LayerSummary: Sendable, CustomStringConvertible {
  var name: String
  var geometry: String
  var featureCount: Int
  var minScale: Double

  init(_ table: FeatureLayerInfo, minScale: Double? = nil) {
    name = table.name
    geometry = table.geometryType.replacingPrefix("esriGeometry").lowercased()
    featureCount = table.features.count
    self.minScale = minScale ?? table.minScale
  }

  var description: String { "\(name) · \(geometry) · \(featureCount) features · visible from \(formatScale(minScale))" }
}

/// One loadable per portal item and per feature table, made on first use and shared after: what
/// an app keeps so that every screen asking for the Parks item gets the same loadable, and one
/// request.
///
/// Everything in it is a pipeline over the portal: `asyncMap` steps that each need only the one
/// before.
final class Catalog: Sendable {
  let portal: AsyncLoadable<PortalInfo>
  private let services: RedlandsServices
  private let items = Locked<[String: AsyncLoadable<PortalItemInfo>]>([:])
  private let tables = Locked<[String: AsyncLoadable<FeatureLayerInfo>]>([:])

  init(services: RedlandsServices) {
    self.services = services
    portal = AsyncLoadable { try await services.portal.portalInfo() }.named("portal")
  }

  /// The portal item `id`: needs the portal, then asks for the item.
  func item(_ id: String, name: String? = nil) -> AsyncLoadable<PortalItemInfo> {
    let services = services
    return items.withLock { items in
      if let item = items[id] { return item }
      let item = portal.asyncMap { _ in try await services.portal.item(id: id) }
      item.name = name ?? "item \(id.prefix(6))"
      items[id] = item
      return item
    }
  }

  /// Layer 0 of the feature service behind the portal item `itemID`: needs the item (its URL).
  func table(itemID: String, name: String? = nil) -> AsyncLoadable<FeatureLayerInfo> {
    let item = item(itemID, name: name.map { "\($0) item" })
    let gis = services.gis
    return tables.withLock { tables in
      if let table = tables[itemID] { return table }
      let table = item.asyncMap { item in try await gis.featureLayer(url: item.url ?? "", layerID: 0) }
      table.name = name.map { "\($0) table" } ?? "table \(itemID.prefix(6))"
      tables[itemID] = table
      return table
    }
  }
}

/// The subclass style, for comparison: a feature layer over a portal item. It has what a
/// pipeline step has not: an identity, and state an app sets before loading (`minScale`).
final class FeatureLayer: AsyncLoadable<LayerSummary>, @unchecked Sendable {
  let item: AsyncLoadable<PortalItemInfo>
  let server: GISServer
  let minScale = Overridable<Double>(0)

  init(item: AsyncLoadable<PortalItemInfo>, server: GISServer) {
    self.item = item
    self.server = server
    super.init()
    addDependency(item)
  }

  override func performLoad() async throws -> LayerSummary {
    let item = try await loadDependency(self.item)
    let table = try await server.featureLayer(url: item.url ?? "", layerID: 0)
    minScale.setLoadedValue(table.minScale)
    return LayerSummary(table, minScale: minScale.value)
  }
}

extension String {
  func replacingPrefix(_ prefix: String) -> String {
    hasPrefix(prefix) ? String(dropFirst(prefix.count)) : self
  }
}
