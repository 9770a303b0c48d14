/// A thumbnail image. Here, a stand-in that knows which item and revision it shows.
public struct Thumbnail: Sendable, Codable, Hashable, CustomStringConvertible {
  public var itemID: String
  /// Increases each time the item's owner uploads a new thumbnail: the loader's version.
  public var revision: Int

  public init(itemID: String, revision: Int) {
    self.itemID = itemID
    self.revision = revision
  }

  /// `r3`
  public var description: String { "r\(revision)" }
}

/// The portal items whose thumbnails the thumbnail service serves, the same on every run and in
/// every process: the Thumbnails playground lists them, and the example server serves them.
public enum ThumbnailCatalog {
  /// One item: its id, its title, and the revision of its thumbnail when the service starts.
  public struct Item: Sendable, Hashable {
    public var id: String
    public var title: String
    public var revision: Int
  }

  /// How many items the example server serves thumbnails for.
  public static let defaultCount = 200

  /// The Redlands portal's items (`Data/portal.json`), then synthetic ones — "Bike Lanes 2024",
  /// "Bus Stops 2024", … — up to `count` items. The revisions follow a fixed pattern.
  public static func redlands(count: Int = defaultCount) -> [Item] {
    struct Portal: Decodable { var items: [PortalItemInfo] }
    let portal = ExampleData.bundled(Portal.self, from: "portal.json").items.map { ($0.id, $0.title) }
    let synthetic = (0..<max(0, count - portal.count)).map { index in
      (syntheticID(index), "\(themes[index % themes.count]) \(2024 - index / themes.count)")
    }
    return (portal + synthetic).prefix(count).enumerated().map { row, item in
      Item(id: item.0, title: item.1, revision: 2 + (row * 7 + 3) % 4)
    }
  }

  private static let themes = [
    "Bike Lanes", "Bus Stops", "Building Footprints", "Council Wards", "Flood Zones", "Historic Districts",
    "Parcels", "Schools", "Sewer Mains", "Sidewalks", "Storm Drains", "Street Trees", "Streetlights",
    "Traffic Signals", "Zoning",
  ]

  /// A portal-style item id (32 hexadecimal digits) for the synthetic item `index`.
  private static func syntheticID(_ index: Int) -> String {
    var state = UInt64(index) &* 0x9E37_79B9_7F4A_7C15
    var id = ""
    for _ in 0..<2 {
      let hex = String(splitMix64(&state), radix: 16)
      id += String(repeating: "0", count: 16 - hex.count) + hex
    }
    return id
  }
}

/// One request to the thumbnail service, as its log keeps it.
public struct ThumbnailRequest: Sendable, Codable, Hashable {
  /// How a request ended.
  public enum Outcome: Sendable, Codable, Hashable {
    /// Answered with this revision; `order` counts the answers (1 for the first).
    case answered(revision: Int, order: Int)
    case failed(String)
    /// Its task was cancelled (over HTTP: the client went away) before the answer.
    case cancelled
  }

  /// Counts the requests since the service started: 1 for the first.
  public var number: Int
  public var itemID: String
  /// The outcome, or `nil` while the request is in flight.
  public var outcome: Outcome?

  /// The revision it answered with and the position of its answer, if it was answered.
  public var answer: (revision: Int, order: Int)? {
    if case .answered(let revision, let order) = outcome { (revision, order) } else { nil }
  }
}

/// How many requests the thumbnail service saw, by outcome.
public struct ThumbnailCounts: Sendable, Hashable {
  public var requests = 0
  public var answered = 0
  public var failed = 0
  public var cancelled = 0
  /// Requests in flight, held or not.
  public var unfinished = 0
  /// Requests held now.
  public var held = 0
}

/// The thumbnail service's request log: every request and its outcome, and the requests it
/// holds now. Over HTTP, the example server sends it to ``ThumbnailClient``.
public struct ThumbnailLog: Sendable, Codable, Hashable {
  /// Goes up with every change, so a copy can tell which of two logs is newer.
  public var version = 0
  /// Every request since the service started or was reset, in the order they arrived (the
  /// oldest are dropped beyond ``ThumbnailService/capacity``).
  public var requests: [ThumbnailRequest] = []
  /// The numbers of the requests held now.
  public var held: Set<Int> = []
  /// How many requests since the last reset the log dropped, the oldest first.
  public var dropped = 0

  public init() {}

  public var counts: ThumbnailCounts {
    var counts = ThumbnailCounts(requests: dropped + requests.count, held: held.count)
    for request in requests {
      switch request.outcome {
      case nil: counts.unfinished += 1
      case .answered: counts.answered += 1
      case .failed: counts.failed += 1
      case .cancelled: counts.cancelled += 1
      }
    }
    return counts
  }

  /// The items whose requests are held now.
  public var heldItemIDs: Set<String> {
    Set(requests.lazy.filter { held.contains($0.number) }.map(\.itemID))
  }
}

/// Which requests the service holds: every request from now on, or the next one for an item.
/// Set where the run is staged: in the service in-process, in the client over HTTP.
struct ThumbnailHolds {
  var everyRequest = false
  var nextRequest: Set<String> = []

  /// Whether the request for `itemID` that arrives now is held.
  mutating func take(_ itemID: String) -> Bool {
    nextRequest.remove(itemID) != nil || everyRequest
  }
}

/// The portal's thumbnail endpoint, as the Thumbnails playground uses it: ``ThumbnailService``
/// in-process, or ``ThumbnailClient`` against the example server.
///
/// A request answers with the revision of the item's thumbnail when the request arrived. Requests
/// can be *held* until ``answerHeldRequests()``, so that "the user scrolled away before the
/// thumbnail arrived" is a fact, not a race; a held request whose task is cancelled ends
/// cancelled. Every change calls the `onChange` given at creation.
public protocol ThumbnailServing: Sendable {
  /// The latency and outages of the network in front of the endpoint.
  var server: SimulatedServer { get }
  /// `GET /sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png`: the item's thumbnail.
  func thumbnail(for itemID: String) async throws -> Thumbnail
  /// Holds every request from now on, until ``answerHeldRequests()``: a slow network.
  func holdRequests()
  /// Holds the next request for `itemID` alone, until ``answerHeldRequests()``.
  func holdNextRequest(for itemID: String)
  /// Stops holding requests; the held ones go on and are answered.
  func answerHeldRequests() async throws
  /// The item's owner uploads a new thumbnail: its revision goes up by one. Returns the new one.
  func uploadNewThumbnail(for itemID: String) async throws -> Int
  /// The request log, as the service keeps it.
  var log: ThumbnailLog { get }
  /// Whether ``log`` has every request this process got an answer to, and no request held that
  /// this process stopped waiting for (over HTTP the log is a copy, which can lag behind, and the
  /// server hears of a cancel a moment after it).
  var logIsCurrent: Bool { get }
}

extension ThumbnailServing {
  /// Every request so far, in the order they arrived.
  public var requests: [ThumbnailRequest] { log.requests }

  public var counts: ThumbnailCounts { log.counts }

  /// Whether a request for `itemID` is held now.
  public func isHolding(_ itemID: String) -> Bool { log.heldItemIDs.contains(itemID) }
}

/// The path of an item's thumbnail on the portal.
func thumbnailPath(_ itemID: String) -> String {
  "/sharing/rest/content/items/\(itemID)/info/thumbnail/thumbnail.png"
}
