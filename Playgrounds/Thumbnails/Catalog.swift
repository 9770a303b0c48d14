import ExampleServices

/// A portal item as the list shows it: a title, and its thumbnail's revisions.
struct CatalogItem: Sendable {
  var id: String
  var title: String
  /// The revision of the item's thumbnail on the portal when the run starts.
  var thumbnailRevision: Int
  /// The revision the app's disk cache holds from the last session, or `nil` for an item the
  /// last session never showed.
  var cachedRevision: Int?
}

/// A thumbnail image. Here, a stand-in that knows which item and revision it shows.
struct Thumbnail: Sendable, CustomStringConvertible {
  var itemID: String
  /// Increases each time the item's owner uploads a new thumbnail: the loader's version.
  var revision: Int

  /// `r3`
  var description: String { "r\(revision)" }
}

enum Catalog {
  /// The Redlands portal's items (`Data/portal.json`), then synthetic ones — "Bike Lanes 2024",
  /// "Bus Stops 2024", … — up to `count` items, the same on every run.
  ///
  /// The thumbnail revisions follow a fixed pattern. The last session saw the first 60 rows but
  /// every fourth (rows 3, 7, 11, …); for most of those the cache holds the revision before the
  /// current one, for rows 2, 8, 14, … the current one.
  static func redlands(count: Int) throws -> [CatalogItem] {
    struct Portal: Decodable { var items: [PortalItemInfo] }
    let portal = try ExampleData.decode(Portal.self, from: "portal.json").items.map { ($0.id, $0.title) }
    let synthetic = (0..<max(0, count - portal.count)).map { index in
      (syntheticID(index), "\(themes[index % themes.count]) \(2024 - index / themes.count)")
    }
    return (portal + synthetic).prefix(count).enumerated().map { row, item in
      let revision = 2 + (row * 7 + 3) % 4
      let seen = row < 60 && row % 4 != 3
      let cached = row % 6 == 2 ? revision : revision - 1
      return CatalogItem(id: item.0, title: item.1, thumbnailRevision: revision, cachedRevision: seen ? cached : nil)
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
      // SplitMix64: 64 bits per step.
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      z ^= z >> 31
      let hex = String(z, radix: 16)
      id += String(repeating: "0", count: 16 - hex.count) + hex
    }
    return id
  }
}

/// The app's thumbnail cache on disk (kept in memory here): the loader's `existingValue` hook.
///
/// It starts with what the last session saw, mostly out of date, and every fresh thumbnail the
/// loader gets is stored in it.
final class ThumbnailCache: Sendable {
  private let images: Locked<[String: Thumbnail]>

  /// A cache that holds the thumbnails the last session saw.
  init(lastSessionOf items: [CatalogItem]) {
    images = Locked(
      Dictionary(uniqueKeysWithValues: items.compactMap { item in
        item.cachedRevision.map { (item.id, Thumbnail(itemID: item.id, revision: $0)) }
      }))
  }

  /// How many thumbnails the cache holds.
  var count: Int { images.withLock { $0.count } }

  /// The cached thumbnail of an item, if any.
  func thumbnail(for itemID: String) -> Thumbnail? {
    images.withLock { $0[itemID] }
  }

  /// Stores `thumbnail` unless the cache holds a newer revision: a slow, stale response must not
  /// overwrite the cache any more than the screen.
  func store(_ thumbnail: Thumbnail) {
    images.withLock { images in
      if let held = images[thumbnail.itemID], held.revision >= thumbnail.revision { return }
      images[thumbnail.itemID] = thumbnail
    }
  }
}
