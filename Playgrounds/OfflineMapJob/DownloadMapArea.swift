import ExampleServices
import Foundation
import LoadableKit

/// The app's connection to the City of Redlands services, shared as `URLSession.shared` would
/// be. A job's parameters name the service by URL and are saved with the job; the connection is
/// not, so a job restored in another process finds it here.
let redlands = RedlandsServices(server: RedlandsServices.commandLineServer)

/// Takes an area offline: downloads the tiles of a map service that cover it, level by level,
/// into a folder. The parameters of a ``Job``, saved in its JSON form.
///
/// Each tile is a unit of work: download it, write it, save a checkpoint, report progress, then
/// stop at a pause point. A paused job parks between two tiles, so saving it then loses nothing
/// and a resumed run writes no tile twice. After a transient error the job runs the work again
/// from the last checkpoint: the tile whose request failed was not written, and is asked for again.
struct DownloadMapArea: JobWork {
  static let kind = "org.loadablekit.playgrounds.download-map-area"

  /// How far a download got: the first `tilesDone` tiles of ``tiles`` are on disk.
  struct Checkpoint: Codable, Sendable {
    var tilesDone = 0
    var bytes = 0
  }

  /// What a finished download wrote.
  struct Downloaded: Sendable {
    var tiles: Int
    var bytes: Int
  }

  /// The area's name, for messages.
  var area: String
  /// The URL of the tiled map service.
  var mapService: String
  var extent: Extent
  var minLevel: Int
  var maxLevel: Int
  /// The path of the folder the tiles go to.
  var folder: String

  init(area: String, mapService: String, extent: Extent, levels: ClosedRange<Int>, folder: URL) {
    self.area = area
    self.mapService = mapService
    self.extent = extent
    self.minLevel = levels.lowerBound
    self.maxLevel = levels.upperBound
    self.folder = folder.path
  }

  /// The tiles to download, in order: level by level, then row by row.
  var tiles: [TileKey] {
    minLevel <= maxLevel ? TileKey.covering(extent, levels: minLevel...maxLevel) : []
  }

  var levelsDescription: String { "levels \(minLevel)–\(maxLevel)" }

  func run(in context: JobContext<Checkpoint>) async throws -> Downloaded {
    let tiles = self.tiles
    let folder = TileFolder(path: folder)
    var done = context.checkpoint ?? Checkpoint()
    if context.checkpoint == nil {
      context.post("Downloading \(tiles.count) tiles of \(area), \(levelsDescription)")
    } else {
      context.post("Continuing from tile \(done.tilesDone + 1) of \(tiles.count), the last checkpoint")
    }
    while done.tilesDone < tiles.count {
      try await context.pausePoint()  // parks here while paused; throws once cancelled
      let key = tiles[done.tilesDone]
      let image = try await redlands.gis.tile(mapService: mapService, key)
      try folder.write(image, for: key)
      done.tilesDone += 1
      done.bytes += image.count
      context.saveCheckpoint(done)  // before the next pause point: a parked job is at a checkpoint
      context.reportProgress(completed: done.tilesDone, total: tiles.count)
    }
    context.post("Downloaded \(tiles.count) tiles of \(area), \(grouped(done.bytes)) bytes")
    return Downloaded(tiles: tiles.count, bytes: done.bytes)
  }

  /// The options for jobs of this work: a `503` from the tile service is transient, retried
  /// after 5 ms, 10 ms, 20 ms… (an app would wait seconds; the playground is in a hurry).
  /// Options hold a closure and are not saved: a restored job is given them again.
  static let options = JobOptions(
    isTransient: { ($0 as? ServiceError)?.code == 503 },
    backoff: .exponential(initial: .milliseconds(5), maximum: .milliseconds(100)))
}

/// The folder an area's tiles are written to, as `tiles/<level>/<row>/<column>.tile`.
///
/// It also keeps `writes.log`, one line per tile written, so that anyone (the playground, its
/// test, you) can check that each tile was written exactly once across all the runs of a job.
struct TileFolder {
  let url: URL

  init(path: String) {
    url = URL(fileURLWithPath: path, isDirectory: true)
  }

  var tilesURL: URL { url.appendingPathComponent("tiles", isDirectory: true) }
  var logURL: URL { url.appendingPathComponent("writes.log") }

  /// Writes one tile (atomically, so an interrupted write leaves no partial tile) and logs it.
  func write(_ image: Data, for key: TileKey) throws {
    let file = tilesURL.appendingPathComponent("\(key).tile")
    try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
    try image.write(to: file, options: .atomic)
    if !FileManager.default.fileExists(atPath: logURL.path) {
      _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)  // a failure shows below
    }
    let log = try FileHandle(forWritingTo: logURL)
    defer { try? log.close() }
    try log.seekToEnd()
    try log.write(contentsOf: Data("\(key)\n".utf8))
  }

  /// The tiles on disk, found by listing the folder, in order.
  func tilesOnDisk() -> [TileKey] {
    let files = FileManager.default.enumerator(at: tilesURL, includingPropertiesForKeys: nil)
    return (files?.allObjects as? [URL] ?? []).compactMap { file in
      guard file.pathExtension == "tile" else { return nil }
      let parts = file.deletingPathExtension().pathComponents.suffix(3).compactMap { Int($0) }
      return parts.count == 3 ? TileKey(level: parts[0], row: parts[1], column: parts[2]) : nil
    }.sorted()
  }

  /// Every tile write in `writes.log`, in the order they happened.
  func writes() -> [String] {
    let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }
}
