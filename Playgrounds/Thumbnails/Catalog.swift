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

enum Catalog {
  /// The items of ``ThumbnailCatalog/redlands(count:)`` — the Redlands portal's, then synthetic
  /// ones, "Bike Lanes 2024", "Bus Stops 2024", … — with what the app's disk cache holds.
  ///
  /// The last session saw the first 60 rows but every fourth (rows 3, 7, 11, …); for most of
  /// those the cache holds the revision before the current one, for rows 2, 8, 14, … the
  /// current one.
  static func redlands(count: Int) -> [CatalogItem] {
    ThumbnailCatalog.redlands(count: count).enumerated().map { row, item in
      let seen = row < 60 && row % 4 != 3
      let cached = row % 6 == 2 ? item.revision : item.revision - 1
      return CatalogItem(id: item.id, title: item.title, thumbnailRevision: item.revision, cachedRevision: seen ? cached : nil)
    }
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

/// The disk cache read asynchronously, as a real one is (a file read off the claiming thread):
/// step 13's load reads it before the network and shows the copy as an interim value.
actor DiskReads {
  private let cache: ThumbnailCache

  init(_ cache: ThumbnailCache) { self.cache = cache }

  func thumbnail(for itemID: String) async -> Thumbnail? { cache.thumbnail(for: itemID) }
}
