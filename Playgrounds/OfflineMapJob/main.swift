// OfflineMapJob: take an area of Redlands offline, tile by tile, with a Job.
//
//     swift run OfflineMapJob                       # download, pause, save the job, exit
//     swift run OfflineMapJob --resume <job.json>   # restore the saved job and finish it
//     swift run OfflineMapJob --output <folder>     # the first run, in a folder of your choice
//
// The work (DownloadMapArea.swift) downloads the tiles that cover an area from the Redlands
// Topographic basemap service, writes each one to a file and saves a checkpoint after it.
//
// The first run starts the job and rides out an outage of the tile service (the job retries from
// its last checkpoint), pauses the job half-way, saves it as JSON, cancels another download, and
// exits. The second run restores the job from the JSON, finishes it, and checks that every tile
// was written exactly once across the two runs.
import ExampleServices
import Foundation
import LoadableKit

let arguments = Arguments(CommandLine.arguments.dropFirst())
_ = redlands  // with --server, checks the server answers before the story starts (DownloadMapArea.swift)
if let saved = arguments.resume {
  exit(await resume(from: saved))  // the second run, at the end of this file
}

// MARK: - The first run

let folder = arguments.output
  ?? FileManager.default.temporaryDirectory.appendingPathComponent("OfflineMapJob-\(UUID().uuidString.prefix(8))")
try createEmptyFolder(folder)
let savedJob = folder.appendingPathComponent("job.json")
print("OfflineMapJob: take downtown Redlands offline, tile by tile, with a Job")
print("(simulated tile service, \(formatDuration(RedlandsServices.defaultLatency)) per request; files in \(folder.path))")

// The Redlands Topographic basemap: the map service of the portal item `RedlandsItems.topographic`.
let topographic = "https://services.redlands.example/arcgis/rest/services/Basemaps/RedlandsTopographic/MapServer"
let downtown = DownloadMapArea(
  area: "Downtown Redlands", mapService: topographic,
  extent: Extent(xmin: -117.195, ymin: 34.045, xmax: -117.170, ymax: 34.065), levels: 12...16,
  folder: folder.appendingPathComponent("downtown-redlands"))
let download = Job(downtown, options: DownloadMapArea.options)
let tileCount = downtown.tiles.count

// MARK: 1. Start, through an outage

printStep("1. Download \(downtown.area): \(tileCount) tiles, \(downtown.levelsDescription)")
redlands.gis.server.scheduleOutage(after: 8, failing: 2)
print("    The tile service will answer 8 requests, then fail 2 with 503 Service Unavailable.")
// Half-way the network stalls: the request for the tile after the half is held until step 2 has
// paused the job, so the pause lands at the same tile on every run (2 more requests: the outage's).
let half = (tileCount + 1) / 2
redlands.gis.server.holdRequests(after: half + 2)
await startAndFollow(download, total: tileCount, unit: "tiles", until: { $0 >= 0.5 })
let retries = download.messages.filter { $0.source == Job<DownloadMapArea>.messageSource && $0.severity == .warning }.count
print("    the job retried \(retries) transient errors, each time from its last checkpoint, and went on")

// MARK: 2. Pause at a checkpoint and save

printStep("2. Half-way, the user leaves: pause at a checkpoint and save the job")
await redlands.gis.server.waitUntilRequestHeld()  // the job has asked for the tile after the half
print("    job.pause() → \(download.pause()), status \(download.status)")
try await redlands.gis.server.releaseHeldRequests()  // the tile on the wire is finished first
await download.waitUntilParked()
let checkpoint = download.checkpoint ?? DownloadMapArea.Checkpoint()
print("    await job.waitUntilParked(): the work stopped after tile \(checkpoint.tilesDone) of \(tileCount), at its checkpoint")
try download.toJSON().write(to: savedJob)
print("    job.toJSON() → \(savedJob.lastPathComponent), \(try summary(ofSavedJob: savedJob))")
let downtownFolder = TileFolder(path: downtown.folder)
print("    \(downtownFolder.tilesOnDisk().count) tiles on disk, \(downtownFolder.writes().count) writes in writes.log")

// MARK: 3. Cancel another download

let prospect = DownloadMapArea(
  area: "Prospect Park", mapService: topographic,
  extent: Extent(xmin: -117.183, ymin: 34.043, xmax: -117.175, ymax: 34.050), levels: 14...17,
  folder: folder.appendingPathComponent("prospect-park"))
let other = Job(prospect, options: DownloadMapArea.options)
let otherCount = prospect.tiles.count

printStep("3. Another download, cancelled: \(prospect.area), \(otherCount) tiles, \(prospect.levelsDescription)")
let quarter = (otherCount + 3) / 4
redlands.gis.server.holdRequests(after: quarter)
await startAndFollow(other, total: otherCount, unit: "tiles", until: { $0 >= 0.25 })
await redlands.gis.server.waitUntilRequestHeld()  // the cancel ends the request on the wire
print("    await job.cancel() → \(await other.cancel()): status \(other.status), error \(describe(other.error))")
try await redlands.gis.server.releaseHeldRequests()
do {
  _ = try await other.output
} catch {
  print("    try await job.output threw \(describe(error))")
}
let partial = TileFolder(path: prospect.folder)
print("    its checkpoint: \(other.checkpoint?.tilesDone ?? 0) tiles; on disk: \(partial.tilesOnDisk().count); the app deletes the partial area")
try FileManager.default.removeItem(at: partial.url)

print("")
print("The app stops here, its download paused and saved. Continue it with:")
print("")
print("    swift run OfflineMapJob --resume \(shellQuoted(savedJob.path))")

// MARK: - The second run

/// Restores the job saved in `file`, finishes it, and checks its folder. Returns the exit status:
/// 0 when every tile was written exactly once.
func resume(from file: URL) async -> Int32 {
  print("OfflineMapJob: continue the download saved in \(file.path)")

  printStep("1. Job.fromJSON: the job comes back as it was saved")
  guard let data = FileManager.default.contents(atPath: file.path) else {
    print("    cannot read \(file.path)")
    return 1
  }
  let job: Job<DownloadMapArea>
  do {
    job = try Job.fromJSON(data, options: DownloadMapArea.options)
  } catch {
    print("    cannot restore the job: \(describe(error))")
    return 1
  }
  let work = job.work
  let tiles = work.tiles
  let folder = TileFolder(path: work.folder)
  let writesBefore = folder.writes().count
  print("    \(work.area): status \(job.status), checkpoint \(job.checkpoint?.tilesDone ?? 0) of \(tiles.count) tiles,"
    + " \(Int(job.fractionCompleted * 100))%, \(job.messages.count) messages")

  if job.status.isFinished {
    printStep("2. job.start() on a finished job")
    print("    job.start() → \(job.start()): the job already \(job.status), and a finished job never runs again")
  } else {
    printStep("2. job.start(): the work runs again from the checkpoint")
    await startAndFollow(job, total: tiles.count, unit: "tiles")
    guard job.status == .succeeded else {
      print("    the job \(job.status): \(describe(job.error))")
      return 1
    }
    do {
      try job.toJSON().write(to: file)
      print("    saved the finished job to \(file.lastPathComponent): resuming it again does nothing")
    } catch {
      print("    cannot save the finished job: \(describe(error))")
    }
  }

  printStep("3. The folder: every tile written exactly once")
  let onDisk = folder.tilesOnDisk()
  printColumns(Dictionary(grouping: onDisk, by: \.level).sorted { $0.key < $1.key }.map { level, keys in
    ["level \(level)", counted(keys.count, "tile"), "rows \(span(keys.map(\.row)))", "columns \(span(keys.map(\.column)))"]
  })
  let writes = folder.writes()
  print("    \(tiles.count) tiles expected, \(onDisk.count) on disk, \(writes.count) writes in writes.log:"
    + " \(writesBefore) before this run, \(writes.count - writesBefore) in it")
  let writeCounts = Dictionary(writes.map { ($0, 1) }, uniquingKeysWith: +)
  let missing = tiles.filter { writeCounts[$0.description] == nil || !onDisk.contains($0) }
  let repeated = writeCounts.filter { $0.value > 1 }.keys.sorted()
  let unexpected = Set(onDisk).subtracting(tiles).count + Set(writes).subtracting(tiles.map(\.description)).count
  guard missing.isEmpty, repeated.isEmpty, unexpected == 0 else {
    print("    NOT exactly once: \(missing.count) missing, \(repeated.count) written more than once, \(unexpected) unexpected")
    return 1
  }
  print("    every tile was written exactly once")
  return 0
}

// MARK: - Helpers

/// The command line: `--output <folder>` for the first run, `--resume <job.json>` for the second.
struct Arguments {
  var output: URL?
  var resume: URL?

  init(_ arguments: ArraySlice<String>) {
    var remaining = arguments
    while let option = remaining.popFirst() {
      switch (option, remaining.popFirst()) {
      case ("--output", let path?): output = URL(fileURLWithPath: path, isDirectory: true)
      case ("--resume", let path?): resume = URL(fileURLWithPath: path)
      case ("--server", _?): break  // read by RedlandsServices.commandLineServer (DownloadMapArea.swift)
      default:
        print("usage: OfflineMapJob [--output <folder>] | --resume <job.json> [--server <url>]")
        exit(2)
      }
    }
  }
}

/// Creates `folder`, which must not exist or be empty: the run writes its tiles and job there.
func createEmptyFolder(_ folder: URL) throws {
  let contents = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
  guard contents.isEmpty else {
    print("OfflineMapJob: \(folder.path) is not empty; give --output a new or empty folder")
    exit(2)
  }
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
}

/// What a saved job's JSON holds, read back from the file: `1,234 bytes: status "paused", …`.
func summary(ofSavedJob file: URL) throws -> String {
  let data = try Data(contentsOf: file)
  let json = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
  let checkpoint = try json["checkpoint"].map {
    String(decoding: try JSONSerialization.data(withJSONObject: $0, options: .sortedKeys), as: UTF8.self)
  }
  return "\(grouped(data.count)) bytes: status \"\(json["status"] ?? "?")\", checkpoint \(checkpoint ?? "none"), "
    + "\((json["messages"] as? [Any])?.count ?? 0) messages"
}

/// `1 tile`, `25 tiles`.
func counted(_ count: Int, _ noun: String) -> String {
  "\(count) \(noun)\(count == 1 ? "" : "s")"
}

/// `26165–26169`, or `1635` for one value.
func span(_ values: [Int]) -> String {
  guard let low = values.min(), let high = values.max() else { return "none" }
  return low == high ? "\(low)" : "\(low)–\(high)"
}

/// `path` as a shell word: as it is when it is plain, in single quotes otherwise.
func shellQuoted(_ path: String) -> String {
  let plain = path.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+".contains($0)) }
  return plain ? path : "'" + path.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
}
