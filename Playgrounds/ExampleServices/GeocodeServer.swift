import Foundation

/// What a locator says about itself: the service metadata of a geocode server, or the header of
/// a locator file.
public struct LocatorInfo: Codable, Sendable, Hashable {
  public struct Properties: Codable, Sendable, Hashable {
    /// The most candidates one request returns, unless the request asks for fewer.
    public var maxResultSize: Int
    /// The lowest score (0–100) a candidate needs to be returned.
    public var minimumCandidateScore: Int

    enum CodingKeys: String, CodingKey {
      case maxResultSize = "MaxResultSize"
      case minimumCandidateScore = "MinimumCandidateScore"
    }
  }

  public var name: String
  public var description: String
  public var capabilities: [String]
  public var countries: [String]
  public var spatialReference: SpatialReference
  public var singleLineAddressField: String
  public var candidateFields: [String]
  public var locatorProperties: Properties
}

/// An address or place a locator knows.
public struct AddressCandidate: Codable, Sendable, Hashable {
  /// The place name, for points of interest.
  public var place: String?
  public var address: String
  /// `PointAddress` or `POI`.
  public var type: String
  public var country: String
  public var x: Double
  public var y: Double

  /// The place and its address, or the address.
  public var label: String { place.map { "\($0), \(address)" } ?? address }
}

/// A candidate with its score (0–100).
public struct ScoredCandidate: Codable, Sendable, Hashable {
  public var candidate: AddressCandidate
  public var score: Int
}

/// The matching both the geocode server and offline locator files use: the share of the search
/// text's words that a candidate contains, ignoring case, punctuation and common abbreviations.
public enum AddressMatcher {
  public static func match(
    _ text: String, in candidates: [AddressCandidate], maxResults: Int, minScore: Int, countryCode: String?
  ) -> [ScoredCandidate] {
    let words = normalized(text)
    guard !words.isEmpty else { return [] }
    let scored = candidates.compactMap { candidate -> ScoredCandidate? in
      if let countryCode, candidate.country != countryCode { return nil }
      let known = Set(normalized(candidate.label))
      let score = words.filter(known.contains).count * 100 / words.count
      return score >= minScore ? ScoredCandidate(candidate: candidate, score: score) : nil
    }
    // Best score first; on a tie, a street address before a place, then alphabetical.
    let ordered = scored.sorted {
      ($1.score, $1.candidate.type == "PointAddress" ? 1 : 0, $0.candidate.label)
        < ($0.score, $0.candidate.type == "PointAddress" ? 1 : 0, $1.candidate.label)
    }
    return Array(ordered.prefix(max(0, maxResults)))
  }

  /// The street address closest to `point`.
  public static func nearestAddress(to point: Point, in candidates: [AddressCandidate]) -> AddressCandidate? {
    candidates.filter { $0.type == "PointAddress" }.min {
      distance($0, point) < distance($1, point)
    }
  }

  private static func distance(_ candidate: AddressCandidate, _ point: Point) -> Double {
    let dx = candidate.x - point.x
    let dy = candidate.y - point.y
    return dx * dx + dy * dy
  }

  private static let abbreviations = [
    "street": "st", "avenue": "ave", "drive": "dr", "east": "e", "west": "w", "north": "n", "south": "s",
    "ca": "california",
  ]

  static func normalized(_ text: String) -> [String] {
    let cleaned = text.lowercased().map { $0.isLetter || $0.isNumber ? $0 : " " }
    return String(cleaned).split(separator: " ").map { abbreviations[String($0)] ?? String($0) }
  }
}

/// The Redlands geocode server (simulated, from `Data/geocode-server.json`).
public final class GeocodeServer: Sendable {
  private struct Document: Decodable {
    var serviceInfo: LocatorInfo
    var candidates: [AddressCandidate]
  }

  /// The network in front of the geocode server: latency, outages.
  public let server: SimulatedServer
  private let document: Document

  /// The URL of the service.
  public let url = "https://geocode.redlands.example/arcgis/rest/services/Redlands/GeocodeServer"

  init(server: SimulatedServer) {
    self.server = server
    document = ExampleData.bundled(Document.self, from: "geocode-server.json")
  }

  /// `GET …/GeocodeServer?f=json`: the service metadata.
  public func serviceInfo() async throws -> LocatorInfo {
    try await server.respondJSON(to: "/GeocodeServer") { document.serviceInfo }
  }

  /// `GET …/GeocodeServer/findAddressCandidates`
  public func findAddressCandidates(
    _ text: String, maxResults: Int, minScore: Int, countryCode: String?
  ) async throws -> [ScoredCandidate] {
    var query = [
      URLQueryItem(name: "text", value: text), URLQueryItem(name: "maxResults", value: "\(maxResults)"),
      URLQueryItem(name: "minScore", value: "\(minScore)"),
    ]
    if let countryCode { query.append(URLQueryItem(name: "countryCode", value: countryCode)) }
    return try await server.respondJSON(to: "/GeocodeServer/findAddressCandidates", query: query) {
      AddressMatcher.match(
        text, in: document.candidates, maxResults: maxResults, minScore: minScore, countryCode: countryCode)
    }
  }

  /// `GET …/GeocodeServer/reverseGeocode`
  public func reverseGeocode(_ point: Point) async throws -> AddressCandidate? {
    try await server.respondJSON(
      to: "/GeocodeServer/reverseGeocode",
      query: [URLQueryItem(name: "x", value: "\(point.x)"), URLQueryItem(name: "y", value: "\(point.y)")]
    ) {
      AddressMatcher.nearestAddress(to: point, in: document.candidates)
    }
  }
}
