import ExampleServices
import Foundation
import LoadableKit

/// The inputs of a geocode operation. Get them from ``LocatorTask/makeDefaultParameters()``,
/// which fills them from the locator's metadata, and change what you need before the call.
struct GeocodeParameters: Sendable {
  var maxResults: Int
  var minScore: Int
  var countryCode: String?
  var resultAttributeNames: [String]
}

/// One candidate a geocode operation found.
struct GeocodeResult: Sendable {
  var label: String
  var type: String
  var score: Int
  var location: Point
}

/// A locator file, as shipped for offline use: the locator's metadata and its addresses.
struct LocatorFile: Decodable {
  var info: LocatorInfo
  var candidates: [AddressCandidate]
}

/// Geocoding bound to one locator: a geocode service online, or a locator file offline.
///
/// The task is loadable: its content is the locator's metadata (and, offline, the file's
/// addresses). Every operation loads it first, so the first call pays for the metadata and the
/// rest do not, all the screens that use the task share one metadata request, and a task that
/// failed to load fails every operation at once, without a request, until `retryLoad()`.
final class LocatorTask: AsyncLoadable<LocatorTask.Locator>, @unchecked Sendable {
  enum Source: Sendable {
    case service(GeocodeServer)
    case file(URL)
  }

  struct Locator: Sendable {
    var info: LocatorInfo
    /// The addresses of a locator file; `nil` for a service, which searches on the server.
    var addresses: [AddressCandidate]?
  }

  let source: Source

  /// A task that geocodes with the geocode service `server`.
  init(service server: GeocodeServer) {
    source = .service(server)
    super.init()
  }

  /// A task that geocodes with the locator file at `url`, offline.
  init(file url: URL) {
    source = .file(url)
    super.init()
  }

  override func performLoad() async throws -> Locator {
    switch source {
    case .service(let server):
      return Locator(info: try await server.serviceInfo(), addresses: nil)
    case .file(let url):
      let file = try JSONDecoder().decode(LocatorFile.self, from: Data(contentsOf: url))
      return Locator(info: file.info, addresses: file.candidates)
    }
  }

  /// Parameters with the locator's own defaults. Loads the task first.
  func makeDefaultParameters() async throws -> GeocodeParameters {
    let info = try await loadedLocator().info
    return GeocodeParameters(
      maxResults: info.locatorProperties.maxResultSize,
      minScore: info.locatorProperties.minimumCandidateScore,
      countryCode: info.countries.first,
      resultAttributeNames: info.candidateFields)
  }

  /// Finds the addresses and places that match `searchText`. Loads the task first; without
  /// `parameters`, uses the defaults.
  func geocode(_ searchText: String, parameters: GeocodeParameters? = nil) async throws -> [GeocodeResult] {
    let locator = try await loadedLocator()
    let effective = if let parameters { parameters } else { try await makeDefaultParameters() }
    let matches: [ScoredCandidate] =
      switch source {
      case .service(let server):
        try await server.findAddressCandidates(
          searchText, maxResults: effective.maxResults, minScore: effective.minScore,
          countryCode: effective.countryCode)
      case .file:
        AddressMatcher.match(
          searchText, in: locator.addresses ?? [], maxResults: effective.maxResults,
          minScore: effective.minScore, countryCode: effective.countryCode)
      }
    return matches.map {
      GeocodeResult(
        label: $0.candidate.label, type: $0.candidate.type, score: $0.score,
        location: Point(x: $0.candidate.x, y: $0.candidate.y))
    }
  }

  /// The street address nearest to `point`. Loads the task first.
  func reverseGeocode(_ point: Point) async throws -> String? {
    let locator = try await loadedLocator()
    switch source {
    case .service(let server):
      return try await server.reverseGeocode(point)?.address
    case .file:
      return AddressMatcher.nearestAddress(to: point, in: locator.addresses ?? [])?.address
    }
  }

  /// The loaded locator: loads the task, or throws the error it failed with.
  private func loadedLocator() async throws -> Locator {
    try await load()
    return content!
  }
}
