import Foundation

/// One result of a portal search: an item, as `GET /sharing/rest/search` lists it.
public struct PortalSearchItem: Codable, Sendable, Hashable {
  public var id: String
  public var title: String
  public var type: String
  public var owner: String
  public var tags: [String]
}

/// What `GET /sharing/rest/search?q=…&start=…&num=…` answers: a page of results, with ArcGIS
/// REST's paging fields.
public struct PortalSearchResponse: Codable, Sendable, Hashable {
  /// The query, as asked.
  public var query: String
  /// How many items match the query, on every page.
  public var total: Int
  /// The 1-based position of this page's first result, as asked.
  public var start: Int
  /// The page size, as asked.
  public var num: Int
  /// The `start` of the next page, or `-1` on the last page.
  public var nextStart: Int
  public var results: [PortalSearchItem]
}

extension PortalSearchResponse {
  /// The page of `items` that `start` (1-based) and `num` ask for, as ArcGIS REST answers it.
  static func page(of items: [PortalSearchItem], query: String, start: Int, num: Int) -> PortalSearchResponse {
    let results = Array(items.dropFirst(start - 1).prefix(num))
    let next = start - 1 + num < items.count ? start + num : -1
    return PortalSearchResponse(query: query, total: items.count, start: start, num: num, nextStart: next, results: results)
  }
}

extension PortalService {
  /// The most results a page may ask for (ArcGIS REST's limit).
  public static let maximumSearchPageSize = 100

  /// `GET /sharing/rest/search?q=<query>&start=<start>&num=<num>`: the items whose title or tags
  /// contain `query` (ignoring case), `num` of them from the `start`th (1-based), in the portal's
  /// order. `nextStart` is `-1` on the last page.
  ///
  /// - Throws: ``ServiceError`` `400 Bad Request` when `start` is below 1 or `num` is not from 1
  ///   to ``maximumSearchPageSize``; the server's latency, outages and stalls as for any request.
  public func search(_ query: String, start: Int, num: Int) async throws -> PortalSearchResponse {
    let path = "/sharing/rest/search"
    let parameters = [
      URLQueryItem(name: "q", value: query), URLQueryItem(name: "start", value: "\(start)"),
      URLQueryItem(name: "num", value: "\(num)"),
    ]
    return try await server.respondJSON(to: path, query: parameters) {
      guard start >= 1, (1...Self.maximumSearchPageSize).contains(num) else {
        throw ServiceError(code: 400, reason: "Bad Request", path: path)
      }
      return PortalSearchResponse.page(of: searchIndex(matching: query), query: query, start: start, num: num)
    }
  }

  /// The items a search for `query` finds, in order.
  func searchIndex(matching query: String) -> [PortalSearchItem] {
    let words = query.lowercased()
    return searchItems.filter { item in
      words.isEmpty || item.title.lowercased().contains(words) || item.tags.contains { $0.lowercased().contains(words) }
    }
  }
}

extension ThumbnailCatalog {
  /// The items a portal search finds (`searchItems` in `Data/portal.json`), with the revisions
  /// of their thumbnails when the service starts: the example server serves their thumbnails
  /// next to ``redlands(count:)``'s.
  public static func portalSearch() -> [Item] {
    struct Portal: Decodable { var searchItems: [PortalSearchItem] }
    return ExampleData.bundled(Portal.self, from: "portal.json").searchItems.enumerated().map { row, item in
      Item(id: item.id, title: item.title, revision: 1 + (row * 5 + 2) % 3)
    }
  }
}
