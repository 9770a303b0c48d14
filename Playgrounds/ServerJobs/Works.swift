import ExampleServices
import Foundation
import LoadableKit

/// How this run was asked for: the folder of the run, and whether it resumes a saved one.
struct Arguments {
  var folder: URL
  var resume = false

  init(_ arguments: ArraySlice<String>) {
    var remaining = arguments
    var folder: URL?
    while let option = remaining.popFirst() {
      switch (option, remaining.popFirst()) {
      case ("--output", let path?): folder = URL(fileURLWithPath: path, isDirectory: true)
      case ("--resume", let path?):
        folder = URL(fileURLWithPath: path, isDirectory: true)
        resume = true
      case ("--server", _?): continue  // read by RedlandsServices.commandLineServer
      default:
        print("usage: ServerJobs [--output <folder>] | --resume <folder>, each with [--server <URL>]")
        exit(2)
      }
    }
    self.folder =
      folder
      ?? FileManager.default.temporaryDirectory.appendingPathComponent("ServerJobs-\(UUID().uuidString.prefix(8))")
  }
}

let arguments = Arguments(CommandLine.arguments.dropFirst())

/// What the playground asks of its job service: the API, the outages it stages, and the log of
/// what was asked.
protocol PlaygroundJobService: JobServiceAPI {
  var server: SimulatedServer { get }
  var requestLog: [String] { get }
  func requests(_ verb: String) -> Int
}

extension JobService: PlaygroundJobService {}
extension JobServiceClient: PlaygroundJobService {}

/// How far ahead of the wall clock the job service's clock runs: the second run comes back
/// "an hour later".
let serviceClockAhead: TimeInterval = arguments.resume ? 3600 : 0

/// The app's connection to the job service, shared as `URLSession.shared` would be. In-process,
/// the service keeps its jobs in the run's folder, so the second run finds the first run's job,
/// and its clock is an hour ahead in the second run. With `--server URL`, the jobs are the
/// `example-server`'s, and main.swift moves the server's clock; the request log stays in the folder.
let jobService: any PlaygroundJobService = {
  do {
    let directory = arguments.folder.appendingPathComponent("job-service")
    if let server = RedlandsServices.commandLineServer {
      return try JobServiceClient(baseURL: server, directory: directory)
    }
    return try JobService(directory: directory, now: { Date().addingTimeInterval(serviceClockAhead) })
  } catch {
    print("ServerJobs: cannot open the job service in \(arguments.folder.path): \(error)")
    exit(1)
  }
}()

/// The Redlands services, for the job that runs on this device.
let redlands = RedlandsServices(server: RedlandsServices.commandLineServer)

/// The app's job service as one type: a ``ServerJobWork`` names the type of its runner's service,
/// and the playground's is in-process or over HTTP, chosen at launch.
struct AppJobService: JobServiceAPI {
  nonisolated(nonsending) func submit(_ request: JobRequest) async throws -> String {
    try await jobService.submit(request)
  }

  nonisolated(nonsending) func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus {
    try await jobService.status(ofJob: id, messagesAfter: sequence)
  }

  nonisolated(nonsending) func cancel(job id: String) async throws -> ServerJobStatus {
    try await jobService.cancel(job: id)
  }

  nonisolated(nonsending) func result(ofJob id: String) async throws -> JobResult {
    try await jobService.result(ofJob: id)
  }
}

/// A job that runs on the server: generate an offline map of an area. The parameters of a `Job`;
/// its checkpoint is the server's job id and what the client has seen of it. A `ServerJobWork`
/// names its runner, so `JobManager.checkServerJobs()` can ask the server about the job without
/// running the work.
struct GenerateOfflineMap: ServerJobWork {
  static let kind = "org.loadablekit.playgrounds.generate-offline-map"
  var area: String

  var runner: ServerJobRunner<AppJobService> {
    ServerJobRunner(
      service: AppJobService(),
      pollSchedule: .exponential(initial: .milliseconds(100), maximum: .milliseconds(400)),
      serverMessageSource: "job service")
  }

  func run(in context: JobContext<ServerJobCheckpoint>) async throws -> JobResult {
    try await runner.run(submitting: JobRequest(task: "GenerateOfflineMap", parameters: ["area": area]), in: context)
  }

  /// A `503` from the job service is transient: the job runs the work again after 50 ms, 100 ms…
  /// and the runner asks for the status at once, without submitting again. Options hold a closure
  /// and are not saved: a restored job is given them again.
  static let options = JobOptions(
    isTransient: { ($0 as? ServiceError)?.code == 503 },
    backoff: .exponential(initial: .milliseconds(50), maximum: .milliseconds(200)))
}

/// A job that runs on this device: fetch the basemap tiles of an area, one per unit, logging each
/// in `writes.log` so the playground can check that none was fetched twice across the runs.
struct FetchBasemapTiles: JobWork {
  static let kind = "org.loadablekit.playgrounds.fetch-basemap-tiles"
  var mapService: String
  var extent: Extent
  var levels: ClosedRange<Int>
  var log: String

  var tiles: [TileKey] { TileKey.covering(extent, levels: levels) }

  func run(in context: JobContext<Int>) async throws -> Int {
    let tiles = self.tiles
    var done = context.checkpoint ?? 0
    context.post(done == 0 ? "Fetching \(tiles.count) tiles" : "Continuing from tile \(done + 1) of \(tiles.count)")
    while done < tiles.count {
      try await context.pausePoint()
      let image = try await redlands.gis.tile(mapService: mapService, tiles[done])
      try appendLine("\(tiles[done]) \(image.count)", to: URL(fileURLWithPath: log))
      done += 1
      context.saveCheckpoint(done)
      context.reportProgress(completed: done, total: tiles.count)
    }
    return tiles.count
  }
}

/// Appends `line` to the file at `url`, creating it.
func appendLine(_ line: String, to url: URL) throws {
  if !FileManager.default.fileExists(atPath: url.path) {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
  }
  let file = try FileHandle(forWritingTo: url)
  defer { try? file.close() }
  try file.seekToEnd()
  try file.write(contentsOf: Data((line + "\n").utf8))
}

/// Waits until `job` has done `fraction` of its work, or finished.
func waitUntil(_ job: some JobHandle, reaches fraction: Double) async {
  for await event in job.events {
    switch event {
    case .snapshot(let snapshot) where snapshot.fractionCompleted >= fraction || snapshot.status.isFinished: return
    case .progress(let done) where done >= fraction: return
    case .status(let status) where status.isFinished: return
    default: continue
    }
  }
}

/// Prints a job's messages as they are posted, from `from` on, prefixed with `label`, on a task of
/// its own. The printing lags behind the job: ``caughtUp(with:)`` waits until it has reached a
/// message count, so that a step's messages are printed under the step's heading.
final class MessagePrinter: Sendable {
  private struct Progress {
    var seen = 0
    var finished = false
    var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  private let progress = Locked(Progress())
  private let task = Locked<Task<Void, Never>?>(nil)

  init(of job: some JobHandle, as label: String, from start: Int = 0) {
    let events = job.events
    let task = Task { [progress] in
      for await event in events {
        switch event {
        case .snapshot(let snapshot):
          for message in snapshot.messages.dropFirst(start) { printMessage(message, label) }
          MessagePrinter.advance(progress, to: snapshot.messages.count)
        case .message(let message):
          let seen = progress.withLock { $0.seen } + 1
          if seen > start { printMessage(message, label) }
          MessagePrinter.advance(progress, to: seen)
        case .status, .progress: continue
        }
      }
      MessagePrinter.advance(progress, to: .max, finished: true)
    }
    self.task.withLock { $0 = task }
  }

  private static func advance(_ progress: Locked<Progress>, to seen: Int, finished: Bool = false) {
    let ready = progress.withLock { progress in
      progress.seen = max(progress.seen, seen)
      progress.finished = progress.finished || finished
      let ready = progress.waiters.filter { $0.count <= progress.seen }
      progress.waiters.removeAll { $0.count <= progress.seen }
      return ready
    }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// Waits until the messages up to `count` are printed (or the job's events ended).
  func caughtUp(with count: Int) async {
    await withCheckedContinuation { continuation in
      let now = progress.withLock { progress in
        guard progress.seen < count else { return true }
        progress.waiters.append((count, continuation))
        return false
      }
      if now { continuation.resume() }
    }
  }

  /// Waits until the job's events end (they end with the job).
  func finished() async { await task.withLock { $0 }?.value }

  /// Stops printing.
  func cancel() { task.withLock { $0 }?.cancel() }
}

func printMessage(_ message: JobMessage, _ label: String) {
  print("    [\(label)] \(message.source.map { "\($0): " } ?? "")\(message.text)")
}
