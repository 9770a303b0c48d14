import Foundation

/// A spatial reference, by well-known id.
public struct SpatialReference: Codable, Sendable, Hashable {
  public var wkid: Int
  public var name: String
}

/// The metadata of a tiled map service.
public struct MapServiceInfo: Codable, Sendable, Hashable {
  public var name: String
  public var spatialReference: SpatialReference
  public var levelsOfDetail: Int
  public var copyrightText: String
}

/// A field of a feature table.
public struct Field: Codable, Sendable, Hashable {
  public var name: String
  public var type: String
  public var alias: String
}

/// One attribute value of a feature.
public enum AttributeValue: Codable, Sendable, Hashable, CustomStringConvertible {
  case integer(Int)
  case double(Double)
  case string(String)

  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if let value = try? container.decode(Int.self) {
      self = .integer(value)
    } else if let value = try? container.decode(Double.self) {
      self = .double(value)
    } else {
      self = .string(try container.decode(String.self))
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .integer(let value): try container.encode(value)
    case .double(let value): try container.encode(value)
    case .string(let value): try container.encode(value)
    }
  }

  public var description: String {
    switch self {
    case .integer(let value): "\(value)"
    case .double(let value): "\(value)"
    case .string(let value): value
    }
  }
}

/// A point in longitude and latitude.
public struct Point: Codable, Sendable, Hashable {
  public var x: Double
  public var y: Double

  public init(x: Double, y: Double) {
    self.x = x
    self.y = y
  }
}

/// A feature: attributes and a location.
public struct Feature: Codable, Sendable, Hashable {
  public var attributes: [String: AttributeValue]
  public var geometry: Point
}

/// The metadata and features of one layer of a feature service.
public struct FeatureLayerInfo: Codable, Sendable, Hashable {
  public var id: Int
  public var name: String
  public var geometryType: String
  /// The service's minimum scale (the layer is hidden when zoomed out beyond it); 0 for none.
  public var minScale: Double
  /// The service's maximum scale; 0 for none.
  public var maxScale: Double
  public var fields: [Field]
  public var features: [Feature]
}

/// The City of Redlands GIS server: map services and feature services (simulated, from
/// `Data/gis-server.json`).
public final class GISServer: Sendable {
  private struct Document: Decodable {
    var root: String
    var mapServices: [String: MapServiceInfo]
    var featureLayers: [String: FeatureLayerInfo]
  }

  /// The network in front of the GIS server: latency, outages, slow services.
  public let server: SimulatedServer
  private let document: Document

  init(server: SimulatedServer) {
    self.server = server
    document = ExampleData.bundled(Document.self, from: "gis-server.json")
  }

  /// `GET <map service url>`
  public func mapService(url: String) async throws -> MapServiceInfo {
    let path = relative(url)
    return try await server.respondJSON(to: path) {
      guard let info = document.mapServices[path] else { throw ServiceError.notFound(path) }
      return info
    }
  }

  /// `GET <feature service url>/<layer id>`
  public func featureLayer(url: String, layerID: Int) async throws -> FeatureLayerInfo {
    let path = "\(relative(url))/\(layerID)"
    return try await server.respondJSON(to: path) {
      guard let info = document.featureLayers[path] else { throw ServiceError.notFound(path) }
      return info
    }
  }

  /// `GET <map service url>/tile/<level>/<row>/<column>`: one tile of a tiled map service.
  ///
  /// Answers `404 Not Found` for a service it does not have and for a tile outside the service's
  /// levels of detail or outside the world.
  public func tile(mapService url: String, _ key: TileKey) async throws -> Data {
    let service = relative(url)
    let path = "\(service)/tile/\(key)"
    return try await server.respondData(to: path) {
      let size = key.level < Int.bitWidth - 2 ? 1 << key.level : 0
      guard let info = document.mapServices[service], (0..<info.levelsOfDetail).contains(key.level),
        (0..<size).contains(key.row), (0..<size).contains(key.column)
      else { throw ServiceError.notFound(path) }
      return key.simulatedImage(of: info.name)
    }
  }

  private func relative(_ url: String) -> String {
    url.hasPrefix(document.root) ? String(url.dropFirst(document.root.count)) : url
  }
}
