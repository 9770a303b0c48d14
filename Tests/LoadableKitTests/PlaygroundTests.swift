#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import LoadableKit
import Foundation
import Synchronization
import Testing

/// Runs a playground's built binary (the test target depends on the executables, so they are
/// built next to the test bundle) and returns what it printed and its exit status, off the
/// cooperative pool: the
/// wait blocks a thread of a serial queue of its own, so playground tests running side by side
/// never starve the pool that every other suite needs (2 threads on a 2-core machine).
///
/// The test's cancellation — its time limit — kills the playground: one that hangs fails its test
/// instead of holding up the run (the wait for its output would otherwise never end).
func runPlayground(_ name: String, arguments: [String] = []) async throws -> (output: String, status: Int32) {
  try await offThePool(killingOnCancel: { child in try runPlaygroundBlocking(name, arguments: arguments, child) })
}

/// A playground's process, as far as the test's cancellation needs it: started unless the test
/// was cancelled first, and killed when the test is cancelled while it runs.
final class ChildProcess: Sendable {
  /// The process's ID while it runs (0 before it starts and once it was waited for), and whether
  /// the test was cancelled.
  private let state = Mutex<(pid: pid_t, cancelled: Bool)>((0, false))

  /// Starts `process`, unless the test was cancelled already.
  func run(_ process: Process) throws {
    try state.withLock(owner: self) { state in
      if state.cancelled { throw CancellationError() }
      try process.run()
      state.pid = process.processIdentifier
    }
  }

  /// The process ended and was waited for: its ID may be another process's from now on.
  func ended() {
    state.withLock(owner: self) { $0.pid = 0 }
  }

  /// The test was cancelled: kills the process if it runs, and keeps it from starting if not.
  func kill() {
    state.withLock(owner: self) { state in
      state.cancelled = true
      guard state.pid > 0 else { return }
      #if canImport(Glibc)
        _ = Glibc.kill(state.pid, SIGKILL)
      #else
        _ = Darwin.kill(state.pid, SIGKILL)
      #endif
    }
  }
}

/// Runs `body`, which blocks, on a thread that is not one of the cooperative pool's.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue(label: "org.loadablekit.tests.blocking").async { continuation.resume(with: Result { try body() }) }
  }
}

/// Runs `body`, which starts a process through the `ChildProcess` it is given and waits for it, off
/// the pool; the test's cancellation kills the process.
func offThePool<T: Sendable>(killingOnCancel body: @escaping @Sendable (ChildProcess) throws -> T) async throws -> T {
  let child = ChildProcess()
  return try await withTaskCancellationHandler {
    try await offThePool { try body(child) }
  } onCancel: {
    child.kill()
  }
}

func runPlaygroundBlocking(
  _ name: String, arguments: [String] = [], _ child: ChildProcess = ChildProcess()
) throws -> (output: String, status: Int32) {
  let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
  let process = Process()
  process.executableURL = directory.appendingPathComponent(name)
  process.arguments = arguments
  let pipe = Pipe()
  process.standardOutput = pipe
  process.standardError = pipe
  try child.run(process)
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  child.ended()
  return (String(decoding: data, as: UTF8.self), process.terminationStatus)
}

/// The lines of a playground's output from the step heading that starts with `heading` (such as
/// `"▸ 2."`) up to the next heading, without the heading.
func section(_ output: String, _ heading: String) -> [String] {
  let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
  guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else { return [] }
  return Array(lines[(start + 1)...].prefix { !$0.hasPrefix("▸") })
}

/// `line` with every run of spaces made one space, and trimmed, so that a test checks what a line
/// says and not how wide its columns are.
func squeezed(_ line: String) -> String {
  line.split(separator: " ").joined(separator: " ")
}

/// The status-trace tree in `lines` whose root line starts with `root`: the root line and the
/// lines under it, squeezed.
func traceTree(_ lines: [String], root: String) -> [String] {
  let squeezedLines = lines.map(squeezed)
  guard let start = squeezedLines.firstIndex(where: { $0.hasPrefix(root + " ") }) else { return [] }
  return [squeezedLines[start]] + squeezedLines[(start + 1)...].prefix { "├└│".contains($0.first ?? " ") }
}

/// Runs a playground as `runPlayground` does, but with its standard output and error on a
/// pseudo-terminal, as in a terminal window, and returns what it wrote there (the terminal's
/// `\r\n` for a newline made `\n` again).
func runPlaygroundOnTerminal(_ name: String, arguments: [String] = []) async throws -> (output: String, status: Int32) {
  try await offThePool(killingOnCancel: { child in try runPlaygroundOnTerminalBlocking(name, arguments: arguments, child) })
}

func runPlaygroundOnTerminalBlocking(
  _ name: String, arguments: [String] = [], _ child: ChildProcess = ChildProcess()
) throws -> (output: String, status: Int32) {
  var terminal: Int32 = -1
  var device: Int32 = -1
  guard openpty(&terminal, &device, nil, nil, nil) == 0 else {
    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
  }
  defer { close(terminal) }
  // Close-on-exec, so that only the playground (which gets the device as its output) holds it
  // open, and not a process another test starts meanwhile.
  _ = fcntl(terminal, F_SETFD, FD_CLOEXEC)
  _ = fcntl(device, F_SETFD, FD_CLOEXEC)
  let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
  let process = Process()
  process.executableURL = directory.appendingPathComponent(name)
  process.arguments = arguments
  process.standardOutput = FileHandle(fileDescriptor: device, closeOnDealloc: false)
  process.standardError = FileHandle(fileDescriptor: device, closeOnDealloc: false)
  do {
    try child.run(process)
  } catch {
    close(device)
    throw error
  }
  close(device)
  // Reading fails with EIO once the playground exited and nobody holds the terminal open.
  var output = [UInt8]()
  var buffer = [UInt8](repeating: 0, count: 4096)
  while true {
    let count = read(terminal, &buffer, buffer.count)
    if count > 0 {
      output += buffer[..<count]
    } else if count < 0 && errno == EINTR {
      continue
    } else {
      break
    }
  }
  process.waitUntilExit()
  child.ended()
  return (String(decoding: output, as: UTF8.self).replacing("\r\n", with: "\n"), process.terminationStatus)
}

/// What a terminal shows for `output`: each line as it stands after its carriage returns and
/// line clears redrew it.
func screen(_ output: String) -> [String] {
  output.split(separator: "\n", omittingEmptySubsequences: false).map { line in
    String(line.split(separator: "\r", omittingEmptySubsequences: false).last ?? "").replacing("\u{1B}[2K", with: "")
  }
}

/// A path in the temporary directory that does not exist yet.
func temporaryPath(_ name: String) -> URL {
  FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
}

@Suite("Playgrounds", .timeLimit(.minutes(2)))
struct PlaygroundTests {
  @Test func quickStartWalksThroughTheStates() async throws {
    let (output, status) = try await runPlayground("QuickStart")
    #expect(status == 0)
    let lines = output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
    // One request for three screens, and all three see the same failure.
    let firstStep = lines.drop { !$0.hasPrefix("▸ Three screens") }.prefix { !$0.hasPrefix("▸ The failure") }
    #expect(firstStep.filter { $0.hasPrefix("→ request") }.count == 1)
    #expect(firstStep.filter { $0.hasSuffix("load failed: 503 Service Unavailable") }.count == 3)
    #expect(lines.contains("load() threw again: 503 Service Unavailable"))
    #expect(lines.contains("loaded City of Redlands with 41 items"))
    #expect(lines.contains("cached: 41 items"))
    #expect(lines.contains("refreshed: 42 items"))
    #expect(lines.contains("status: failed, error: CancellationError"))
    #expect(lines.contains("the old content is still there: 42 items"))
    #expect(lines.contains("status: loaded, 43 items"))
    // The status trace is complete and in order.
    let trace = lines.filter { $0.hasPrefix("[status]") }.map { $0.dropFirst(9) }
    #expect(trace == ["notLoaded", "loading", "failed", "loading", "loaded", "loading", "loaded", "loading", "failed", "loading", "loaded"])
    #expect(lines.last == "Done.")
  }

  @Test func pagedSearchScrollsRidesOutAFailedPageAndRefreshes() async throws {
    let (output, status) = try await runPlayground("PagedSearch")
    #expect(status == 0)
    func lines(_ heading: String) -> [String] { section(output, heading).map(squeezed) }
    let park1to5 = "Brookside Park, Caroline Park, Ford Park, Hillside Memorial, Jennie Davis Park"
    let park6to10 = "Key Park, Prospect Park, Redlands Bowl, Smiley Park, Sylvan Park"

    // 2. Three callers, one request for the next page; the first page shown meanwhile.
    let scroll = lines("▸ 2.")
    #expect(scroll.filter { $0.hasPrefix("→ GET") } == ["→ GET /sharing/rest/search?q=parks&start=6&num=5"])
    #expect(scroll.contains("next page: loading, the first page still shown: 5 items"))
    #expect(scroll.contains("2 page(s) held: \(park1to5), \(park6to10)"))

    // 3. The failure keeps the pages and sticks (no request) until the retry.
    let failure = lines("▸ 3.")
    #expect(failure.contains("loadNextPage() threw: 503 Service Unavailable"))
    #expect(failure.contains("again, without a request: 503 Service Unavailable"))
    #expect(failure.contains("requests made meanwhile: 0"))
    #expect(failure.contains("status: loaded, next page: failed"))
    #expect(failure.filter { $0.hasPrefix("→ GET") }.count == 2)
    #expect(failure.last { $0.hasPrefix("2 page(s) held") }?.hasPrefix("2 page(s) held, 1 dropped before: Key Park") == true)

    // 4. The dropped first page loads again from its cursor.
    #expect(lines("▸ 4.").contains("2 page(s) held: \(park1to5), \(park6to10)"))

    // 5. The refresh supersedes the next page at once; the fresh first page replaces the pages.
    let refresh = lines("▸ 5.")
    #expect(refresh.contains("after sync(): status loading, next page notLoaded"))
    #expect(refresh.contains("1 page(s) held: \(park1to5)"))

    // 6. The failed next page in the dependency tree.
    #expect(Array(lines("▸ 6.").prefix { !$0.isEmpty }.suffix(3)) == ["search [loaded]", "├─ portal [loaded]", "└─ search.nextPage(6) [failed: 503 Service Unavailable] (incidental)"])
    #expect(output.hasSuffix("Done.\n"))
  }

  @Test func pagedSearchClaimsTheThumbnailsOfTheRowsShown() async throws {
    let (output, status) = try await runPlayground("PagedSearch")
    #expect(status == 0)
    func thumbnails(_ heading: String) -> [String] {
      section(output, heading).map(squeezed).filter { $0.hasPrefix("thumbnails:") }
    }
    // The revisions of the thumbnails of the parks 1–5, 6–10 and 11–13.
    let (page1, page2, page3) = ("r3 r2 r1 r3 r2", "r1 r3 r2 r1 r3", "r2 r1 r3")
    #expect(thumbnails("▸ 1.") == ["thumbnails: 5 claims begun, 0 ended, 5 requests: \(page1)"])
    #expect(thumbnails("▸ 2.") == ["thumbnails: 5 claims begun, 0 ended, 5 requests: \(page1) \(page2)"])
    // The failed page changes no row; the retried one drops the first page's rows.
    #expect(thumbnails("▸ 3.") == [
      "thumbnails: 0 claims begun, 0 ended, 0 requests: \(page1) \(page2)",
      "thumbnails: 3 claims begun, 5 ended, 3 requests: \(page2) \(page3)",
    ])
    // Scrolling back: the first page's rows claim their idle, loaded thumbnails: no request.
    #expect(thumbnails("▸ 4.") == ["thumbnails: 5 claims begun, 3 ended, 0 requests: \(page1) \(page2)"])
    #expect(thumbnails("▸ 5.") == ["thumbnails: 0 claims begun, 5 ended, 0 requests: \(page1)"])
  }

  @Test func mapViewerTracesTheOutageTheRetryTheCancelAndTheOverride() async throws {
    let (output, status) = try await runPlayground("MapViewer")
    #expect(status == 0)

    // 1. The portal's 503 fails the required chain up to the map; the incidental layers fail too.
    let outage = section(output, "▸ 1.")
    #expect(outage.map(squeezed).contains("map.load() threw 503 Service Unavailable"))
    let failedChain = "notLoaded → loading → failed 503 Service Unavailable"
    #expect(traceTree(outage, root: "map") == [
      "map \(failedChain)",
      "├─ basemap \(failedChain)",
      "│ └─ Topographic item \(failedChain)",
      "│ └─ portal \(failedChain)",
      "├─ Parks (incidental) \(failedChain)",
      "│ └─ Parks table \(failedChain)",
      "│ └─ Parks item \(failedChain)",
      "│ └─ portal (see above)",
      "└─ Trails (incidental) \(failedChain)",
      "└─ Trails table \(failedChain)",
      "└─ Trails item \(failedChain)",
      "└─ portal (see above)",
    ])
    #expect(outage.map(squeezed).contains(
      "map.load() again: 503 Service Unavailable at once, without a request (the failure sticks)"))
    #expect(outage.map(squeezed).contains("portal requests so far: 1, shared by the three items that asked"))
    // The trace is a table: every status column starts at the same place.
    let columns = Set(outage.filter { $0.contains(" → ") }.compactMap { $0.range(of: "notLoaded")?.lowerBound.utf16Offset(in: $0) })
    #expect(columns.count == 1)

    // 2. One retry recovers every failed link; Trails' 404 fails that layer alone.
    let retry = section(output, "▸ 2.")
    let recovered = "failed → loading → loaded"
    #expect(traceTree(retry, root: "map") == [
      "map \(recovered)",
      "├─ basemap \(recovered)",
      "│ └─ Topographic item \(recovered)",
      "│ └─ portal \(recovered)",
      "├─ Parks (incidental) \(recovered)",
      "│ └─ Parks table \(recovered)",
      "│ └─ Parks item \(recovered)",
      "│ └─ portal (see above)",
      "└─ Trails (incidental) failed → loading → failed 404 Not Found",
      "└─ Trails table failed → loading → failed 404 Not Found",
      "└─ Trails item \(recovered)",
      "└─ portal (see above)",
    ])
    #expect(retry.contains { $0.contains("portal answered once for all (1 request)") })
    #expect(retry.map(squeezed).contains("title bar City of Redlands · Redlands Topographic"))
    #expect(retry.map(squeezed).contains(
      "map loaded, in WGS 1984 Web Mercator (auxiliary sphere) (3857), from its basemap"))
    #expect(retry.map(squeezed).contains(
      "Parks loaded, 4 features: Ford Park, Prospect Park, Sylvan Park, Smiley Park"))
    #expect(retry.map(squeezed).contains("Trails failed: 404 Not Found"))

    // 3. cancelLoad() fails the layer and restores the table whose attempt it had started.
    let cancel = section(output, "▸ 3.")
    #expect(cancel.map(squeezed).contains("hydrants.cancelLoad(): the waiting load() threw CancellationError"))
    #expect(traceTree(cancel, root: "Fire Hydrants") == [
      "Fire Hydrants notLoaded → loading → failed CancellationError",
      "└─ Fire Hydrants table notLoaded → loading → notLoaded",
      "└─ Fire Hydrants item notLoaded → loading → loaded",
      "└─ portal loaded",
    ])

    // 4. The retry loads it, and the minScale set before loading wins over the service's.
    let override = section(output, "▸ 4.")
    #expect(traceTree(override, root: "Fire Hydrants") == [
      "Fire Hydrants failed → loading → loaded",
      "└─ Fire Hydrants table notLoaded → loading → loaded",
      "└─ Fire Hydrants item loaded",
      "└─ portal loaded",
    ])
    #expect(override.map(squeezed).contains("minScale 1:5,000 yours, set before loading"))
    #expect(override.map(squeezed).contains("1:10,000 the service's, after minScale.removeOverride()"))

    // 5. The dependency tree, load times left out.
    let tree = section(output, "▸ 5.").map { squeezed($0.replacing(/\s[0-9.]+ ms\]/, with: "]")) }.filter { !$0.isEmpty }
    #expect(tree == [
      "map [loaded]",
      "├─ basemap [loaded]",
      "│ └─ Topographic item [loaded]",
      "│ └─ portal [loaded]",
      "├─ Parks [loaded] (incidental)",
      "│ └─ Parks table [loaded]",
      "│ └─ Parks item [loaded]",
      "│ └─ portal [loaded]",
      "├─ Trails [failed: 404 Not Found] (incidental)",
      "│ └─ Trails table [failed: 404 Not Found]",
      "│ └─ Trails item [loaded]",
      "│ └─ portal [loaded]",
      "└─ Fire Hydrants [loaded] (incidental)",
      "└─ Fire Hydrants table [loaded]",
      "└─ Fire Hydrants item [loaded]",
      "└─ portal [loaded]",
    ])

    // 6. The instrument's trace of steps 1 and 2: every attempt under the attempt that asked for
    // it, with its outcome and duration, in the map's order; the shared portal under the first
    // item in that order, whichever item asked first — the same tree on every run.
    let attempts = section(output, "▸ 6.").filter { $0.contains(" in ") && $0.contains(" ms") }
    let unavailable = "failed: 503 Service Unavailable"
    #expect(attempts.map { $0.replacing(/\ in [0-9]+ ms/, with: "") } == [
      "    map (load) \(unavailable)",
      "    ├─ basemap (load) \(unavailable)",
      "    │  └─ Topographic item (load) \(unavailable)",
      "    │     └─ portal (load) \(unavailable)",
      "    ├─ Parks (load) \(unavailable)",
      "    │  └─ Parks table (load) \(unavailable)",
      "    │     └─ Parks item (load) \(unavailable)",
      "    └─ Trails (load) \(unavailable)",
      "       └─ Trails table (load) \(unavailable)",
      "          └─ Trails item (load) \(unavailable)",
      "    map (retry) loaded",
      "    ├─ basemap (retry) loaded",
      "    │  └─ Topographic item (retry) loaded",
      "    │     └─ portal (retry) loaded",
      "    ├─ Parks (retry) loaded",
      "    │  └─ Parks table (retry) loaded",
      "    │     └─ Parks item (retry) loaded",
      "    └─ Trails (retry) failed: 404 Not Found",
      "       └─ Trails table (retry) failed: 404 Not Found",
      "          └─ Trails item (retry) loaded",
    ])
  }

  @Test func pipelinesRetryThroughTheChainStayLiveAndFailFast() async throws {
    let (output, status) = try await runPlayground("Pipelines")
    #expect(status == 0)

    // 1. An outage bubbles down the asyncMap chain; one retry at its end goes up to the portal.
    let chain = section(output, "▸ 1.")
    #expect(chain.map(squeezed).contains("portal down: parksSummary.load() threw 503 Service Unavailable"))
    #expect(chain.map(squeezed).contains(
      "portal back: parksSummary.retryLoad() → Parks · polygon · 4 features · visible from 1:150,000"))
    let failedThenLoaded = "notLoaded → loading → failed → loading → loaded"
    #expect(traceTree(chain, root: "Parks summary") == [
      "Parks summary \(failedThenLoaded)",
      "└─ Parks table \(failedThenLoaded)",
      "└─ Parks item \(failedThenLoaded)",
      "└─ portal \(failedThenLoaded)",
    ])

    // 2. A map of the item recomputes without an attempt; the asyncMap goes stale.
    let live = section(output, "▸ 2.").map(squeezed)
    #expect(traceTree(section(output, "▸ 2."), root: "item row") == [
      "item row loaded",
      "└─ Parks item loaded → loading → loaded",
      "└─ portal loaded → loading → loaded",
    ])
    #expect(live.contains("before parksItem.fetch() Parks · Feature Service · 8,311 views"))
    #expect(live.contains("after Parks · Feature Service · 8,312 views"))
    #expect(live.contains("parksTable.needsSync true"))
    #expect(live.contains("after parksTable.fetchIfNeeded(): needsSync false"))

    // 3. joined and flatMap: the inner loadables appear in the tree.
    let chosen = section(output, "▸ 3.").map { squeezed($0.replacing(/\s[0-9.]+ ms\]/, with: "]")) }
    #expect(chosen.contains("web map Redlands Parks and Trails: Parks, Trails, Fire Hydrants"))
    #expect(chosen.contains("basemap Redlands Topographic (Map Service)"))
    #expect(chosen.contains("basemap [loaded]"))
    #expect(chosen.contains("│ └─ web map data [loaded]"))
    #expect(chosen.contains("└─ Redlands Topographic item [loaded]"))

    // 4. zip fails fast on the broken layer; loadAll reports each outcome.
    let zipped = section(output, "▸ 4.").map(squeezed)
    #expect(zipped.contains("status bar: City of Redlands: 4 parks, 3 hydrants"))
    #expect(zipped.contains("all the web map's tables, zipped: 404 Not Found (Trails' service is gone)"))
    #expect(Array(zipped.suffix(from: 2).prefix(3)) == [
      "Parks loaded", "Trails failed: 404 Not Found", "Fire Hydrants loaded",
    ])

    // 5. Only the subclass keeps a minScale set before loading.
    let both = section(output, "▸ 5.").map(squeezed)
    #expect(both.contains("pipeline Parks · polygon · 4 features · visible from 1:150,000"))
    #expect(both.contains("subclass Parks · polygon · 4 features · visible from 1:50,000 (minScale set before loading)"))
  }

  @Test func geocodeRunsOneTaskOnlineAndOfflineAndFallsBack() async throws {
    let (output, status) = try await runPlayground("Geocode")
    #expect(status == 0)

    // 1. Each task loads once, and its defaults come from its own metadata.
    let defaults = section(output, "▸ 1.")
    #expect(traceTree(defaults, root: "online task") == ["online task notLoaded → loading → loaded"])
    #expect(traceTree(defaults, root: "offline task") == ["offline task notLoaded → loading → loaded"])
    let table = defaults.map(squeezed)
    #expect(table.contains("locator Redlands Composite Locator Redlands Streets (offline)"))
    #expect(table.contains("maxResults 6 3"))
    #expect(table.contains("minScore 80 85"))
    #expect(table.contains("countryCode USA USA"))

    // 2. Changed parameters change the results; the metadata was asked for once.
    let changed = section(output, "▸ 2.").map(squeezed)
    let esri = "380 New York St, Redlands, California, 92373"
    #expect(changed == [
      "with the defaults (maxResults 6, minScore 80):",
      "\(esri) PointAddress score 100",
      "Esri, \(esri) POI score 100",
      "with minScore 60, maxResults 3: near misses too",
      "\(esri) PointAddress score 100",
      "Esri, \(esri) POI score 100",
      "380 Alabama St, Redlands, California, 92373 PointAddress score 60",
      "1 metadata request for the three calls: the task loaded once",
      "",
    ])

    // 3. Online and offline answer the same addresses; only the service knows places.
    let both = section(output, "▸ 3.").map(squeezed)
    #expect(both.contains("online 125 W Vine St, Redlands, California, 92373 score 100"))
    #expect(both.contains("offline 125 W Vine St, Redlands, California, 92373 score 100"))
    #expect(both.contains("online Redlands Bowl, 25 Grant St, Redlands, California, 92373 score 100"))
    #expect(both.contains("offline no match: the file has no places"))
    #expect(both.filter { $0.hasSuffix("35 Cajon St, Redlands, California, 92373") }.count == 2)

    // 4. The outage: fall back offline, no request while the failure sticks, retry recovers.
    let outage = section(output, "▸ 4.").map(squeezed)
    let fallback = "offline: 25 Grant St, Redlands, California, 92373 (online: 503 Service Unavailable)"
    #expect(outage.filter { $0 == fallback }.count == 2)
    #expect(outage.contains("the second search made 0 requests: the failed load sticks"))
    #expect(outage.contains("online: 25 Grant St, Redlands, California, 92373"))
    #expect(outage.last { !$0.isEmpty } == "relaunched online task notLoaded → loading → failed → loading → loaded")
  }

  @Test func offlineMapJobPausesSavesExitsAndResumesWritingEveryTileOnce() async throws {
    let folder = temporaryPath("OfflineMapJob")
    defer { try? FileManager.default.removeItem(at: folder) }
    let saved = folder.appendingPathComponent("job.json")
    let area = folder.appendingPathComponent("downtown-redlands")

    // The first run. 1. Two 503s, each retried from the checkpoint after a short backoff.
    let (first, firstStatus) = try await runPlayground("OfflineMapJob", arguments: ["--output", folder.path])
    #expect(firstStatus == 0)
    let retried = "after a transient error: 503 Service Unavailable (LoadableKit)"
    #expect(section(first, "▸ 1.").map(squeezed) == [
      "The tile service will answer 8 requests, then fail 2 with 503 Service Unavailable.",
      "status started",
      "info Downloading 41 tiles of Downtown Redlands, levels 12–16",
      "warning Retry 1 in 0.005 seconds \(retried)",
      "info Continuing from tile 9 of 41, the last checkpoint",
      "warning Retry 2 in 0.01 seconds \(retried)",
      "info Continuing from tile 9 of 41, the last checkpoint",
      "[█████░░░░░░░░░░░░░░░] 26% 11 of 41 tiles",
      "[██████████░░░░░░░░░░] 51% 21 of 41 tiles",
      "the job retried 2 transient errors, each time from its last checkpoint, and went on",
      "",
    ])

    // 2. Paused half-way, parked at a checkpoint, saved: the file, the folder and the output agree.
    let pause = section(first, "▸ 2.").map(squeezed)
    #expect(pause.first == "job.pause() → true, status paused")
    let parked = try #require(pause.lazy.compactMap { $0.firstMatch(of: /the work stopped after tile (\d+) of 41, at its checkpoint/) }.first)
    let tilesDone = try #require(Int(parked.1))
    #expect((21...40).contains(tilesDone))
    #expect(pause.contains {
      $0.wholeMatch(of: /job.toJSON\(\) → job.json, [0-9,]+ bytes: status "paused", checkpoint \{"bytes":\d+,"tilesDone":(\d+)\}, 5 messages/)?.1 == "\(tilesDone)"
    })
    #expect(pause.contains("\(tilesDone) tiles on disk, \(tilesDone) writes in writes.log"))
    let json = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: saved)) as? [String: Any])
    #expect(json["status"] as? String == "paused")
    #expect((json["checkpoint"] as? [String: Any])?["tilesDone"] as? Int == tilesDone)
    #expect(try tileFiles(in: area).count == tilesDone)

    // 3. The second download is cancelled: failed with CancellationError, its tiles deleted.
    let cancel = section(first, "▸ 3.").map(squeezed)
    #expect(Array(cancel.prefix(5)) == [
      "status started",
      "info Downloading 28 tiles of Prospect Park, levels 14–17",
      "[█████░░░░░░░░░░░░░░░] 25% 7 of 28 tiles",
      "await job.cancel() → true: status failed, error CancellationError",
      "try await job.output threw CancellationError",
    ])
    let partial = try #require(cancel.dropFirst(5).first?.wholeMatch(
      of: /its checkpoint: (\d+) tiles; on disk: (\d+); the app deletes the partial area/))
    #expect(partial.1 == partial.2)
    #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("prospect-park").path))

    // The run ends with the command that continues the download.
    let lastLine = first.split(separator: "\n").last.map(String.init)
    #expect(lastLine == "    swift run OfflineMapJob --resume \(saved.path)")

    // The second run: restored paused at the checkpoint, it finishes from the next tile.
    let (second, secondStatus) = try await runPlayground("OfflineMapJob", arguments: ["--resume", saved.path])
    #expect(secondStatus == 0)
    let restored = section(second, "▸ 1.").map(squeezed)
    #expect(restored.first?.hasPrefix("Downtown Redlands: status paused, checkpoint \(tilesDone) of 41 tiles, ") == true)
    let resumed = section(second, "▸ 2.").map(squeezed)
    #expect(Array(resumed.prefix(2)) == ["status started", "info Continuing from tile \(tilesDone + 1) of 41, the last checkpoint"])
    #expect(Array(resumed.suffix(5)) == [
      "[████████████████████] 100% 41 of 41 tiles",
      "info Downloaded 41 tiles of Downtown Redlands, 12,153 bytes",
      "status succeeded",
      "saved the finished job to job.json: resuming it again does nothing",
      "",
    ])
    let check = section(second, "▸ 3.").map(squeezed).filter { !$0.isEmpty }
    #expect(check == [
      "level 12 1 tile rows 1635 columns 714",
      "level 13 2 tiles rows 3270–3271 columns 1429",
      "level 14 4 tiles rows 6541–6542 columns 2858–2859",
      "level 15 9 tiles rows 13082–13084 columns 5716–5718",
      "level 16 25 tiles rows 26165–26169 columns 11433–11437",
      "41 tiles expected, 41 on disk, 41 writes in writes.log: \(tilesDone) before this run, \(41 - tilesDone) in it",
      "every tile was written exactly once",
    ])

    // The folder, read here: 41 tiles, each written once across the two runs, each with its bytes.
    let files = try tileFiles(in: area)
    let writes = try String(contentsOf: area.appendingPathComponent("writes.log"), encoding: .utf8)
      .split(separator: "\n").map(String.init)
    #expect(files.count == 41)
    #expect(writes.count == 41)
    #expect(Set(writes) == Set(files))
    let tile = try Data(contentsOf: area.appendingPathComponent("tiles/16/26169/11437.tile"))
    #expect(tile.count == 256 + "Redlands Topographic tile 16/26169/11437\n".utf8.count)
    #expect(tile.starts(with: Data("Redlands Topographic tile 16/26169/11437\n".utf8)))

    // A third run finds the job finished: start() returns false, and nothing is written again.
    let (third, thirdStatus) = try await runPlayground("OfflineMapJob", arguments: ["--resume", saved.path])
    #expect(thirdStatus == 0)
    #expect(section(third, "▸ 1.").map(squeezed).first == "Downtown Redlands: status succeeded, checkpoint 41 of 41 tiles, 100%, 7 messages")
    #expect(section(third, "▸ 2.").map(squeezed).first == "job.start() → false: the job already succeeded, and a finished job never runs again")
    #expect(section(third, "▸ 3.").map(squeezed).filter { !$0.isEmpty }.suffix(2) == [
      "41 tiles expected, 41 on disk, 41 writes in writes.log: 41 before this run, 0 in it",
      "every tile was written exactly once",
    ])

    // The check can fail: a tile written twice is reported, with a failing exit status.
    let log = try FileHandle(forWritingTo: area.appendingPathComponent("writes.log"))
    try log.seekToEnd()
    try log.write(contentsOf: Data("16/26169/11437\n".utf8))
    try log.close()
    let (fourth, fourthStatus) = try await runPlayground("OfflineMapJob", arguments: ["--resume", saved.path])
    #expect(fourthStatus == 1)
    #expect(section(fourth, "▸ 3.").map(squeezed).contains(
      "NOT exactly once: 0 missing, 1 written more than once, 0 unexpected"))
  }

  @Test func offlineMapJobDrawsItsProgressBarInPlaceOnATerminal() async throws {
    let folder = temporaryPath("OfflineMapJob")
    defer { try? FileManager.default.removeItem(at: folder) }
    let (output, status) = try await runPlaygroundOnTerminal("OfflineMapJob", arguments: ["--output", folder.path])
    #expect(status == 0)
    // Every progress report redraws the bar: a carriage return, a line clear, the bar.
    let frames = output.matches(of: /\r\u{1B}\[2K    \[[█░]{20}\] +\d+%  (\d+) of 41 tiles/).compactMap { Int($0.1) }
    #expect(Set(frames).isSuperset(of: 1...21))
    #expect(frames == frames.sorted())
    #expect(output.contains("\r\u{1B}[2K    [█████░░░░░░░░░░░░░░░]  25%  7 of 28 tiles"))
    // A message goes above the bar, which is drawn again under it.
    #expect(output.contains(
      "\r\u{1B}[2K    info     Continuing from tile 9 of 41, the last checkpoint\n    [███░░░░░░░░░░░░░░░░░]  19%  8 of 41 tiles"))
    // On the screen, each download leaves one bar: where it stopped.
    let shown = screen(output).map(squeezed)
    let bars = shown.filter { $0.hasPrefix("[") }
    #expect(bars == ["[██████████░░░░░░░░░░] 51% 21 of 41 tiles", "[█████░░░░░░░░░░░░░░░] 25% 7 of 28 tiles"])
    #expect(shown.contains("the job retried 2 transient errors, each time from its last checkpoint, and went on"))
  }

  @Test func offlineMapJobRejectsAFileThatIsNotASavedJob() async throws {
    let file = temporaryPath("OfflineMapJob").appendingPathExtension("json")
    defer { try? FileManager.default.removeItem(at: file) }
    try Data(#"{"schemaVersion":1,"kind":"org.loadablekit.playgrounds.dow"#.utf8).write(to: file)
    let (output, status) = try await runPlayground("OfflineMapJob", arguments: ["--resume", file.path])
    #expect(status == 1)
    #expect(section(output, "▸ 1.").first?.hasPrefix("    cannot restore the job: JobError.truncated: ") == true)
  }

  @Test func thumbnailsShowsCachedFirstCancelsScrolledAwayLoadsAndBalancesItsCounts() async throws {
    let (output, status) = try await runPlayground("Thumbnails")
    #expect(status == 0)
    // The run waits for facts, never for time: a second run prints the same.
    let (again, _) = try await runPlayground("Thumbnails")
    #expect(again.split(separator: "\n").dropFirst(3) == output.split(separator: "\n").dropFirst(3))

    // Every cell, in every step: its first frame is what the loader had — a cached revision
    // shown with the status loading, or a thumbnail in memory — and the revision it shows never
    // goes down, however the responses arrive.
    let cells = output.split(separator: "\n").map { squeezed(String($0)) }.compactMap {
      $0.wholeMatch(of: /(\d+) .+? ((?:r\d+|—) \w+(?: → (?:r\d+|—) \w+)*)(?: [a-z].*)?/)
    }
    let expectedCells: Int = 6 + 12 + 6 + 6
    #expect(cells.count == expectedCells)
    for cell in cells {
      let frames = cell.2.split(separator: " → ").map { $0.split(separator: " ") }
      #expect(["loading", "loaded"].contains(frames[0][1]), "row \(cell.1): \(cell.2)")
      let revisions = frames.compactMap { Int($0[0].dropFirst()) }
      #expect(revisions == revisions.sorted(), "row \(cell.1): \(cell.2)")
    }

    // 1. Cached thumbnails first, then the current ones; a cached one that is current stays.
    #expect(Array(section(output, "▸ 1.").map(squeezed).prefix(9)) == [
      "0 Redlands Topographic r4 loading → r5 loaded",
      "1 Parks r3 loading → r4 loaded",
      "2 Trails r3 loading → r3 loaded the cached one is current: kept",
      "3 Fire Hydrants — loading → r2 loaded nothing cached",
      "4 Redlands Parks and Trails r4 loading → r5 loaded",
      "5 Bike Lanes 2024 r3 loading → r4 loaded",
      "events 6 loads started (5 with a prior value), 6 loaded",
      "service 6 requests, 6 answered",
      "entries 6: 6 claimed, 0 idle",
    ])

    // 2. Rows that scroll away before their thumbnails arrive: loads cancelled, nothing drawn.
    let scrolled = section(output, "▸ 2.").map(squeezed)
    #expect(scrolled.contains("rows 12–17 appear and rows 6–11 scroll away: their 6 loads are cancelled"))
    #expect(scrolled.filter { $0.hasSuffix(" loading scrolled away: cancelled") }.count == 6)
    #expect(scrolled.contains("their entries are idle, notLoaded, with the cached thumbnails they had (4 of 6)"))
    #expect(Array(scrolled.suffix(4).prefix(3)) == [
      "events 12 loads started (9 with a prior value), 6 loaded, 6 cancelled",
      "service 12 requests, 6 answered, 6 cancelled before an answer",
      "entries 18: 6 claimed, 12 idle",
    ])

    // 3. Idle entries beyond 12 are evicted: those with nothing to show first, then the least
    // recently used (issue 15: a fling no longer evicts the real thumbnails).
    #expect(section(output, "▸ 3.").map(squeezed).contains(
      "rows 12–17 go idle: 18 idle entries; 6 are evicted: the 2 with nothing to show first, then the least recently used"))

    // 4. Back up: cancelled rows load again; rows idle in memory need no request.
    let back = section(output, "▸ 4.").map(squeezed)
    #expect(back.filter { $0.hasSuffix("loaded in memory: no request") }.count == 3)
    #expect(back.contains("service 3 requests, 3 answered"))

    // 5. The slow, stale request is superseded at once by the refresh's own and never drawn
    // (SPEC §5, "Nothing waits behind a stale or abandoned load"; before issue 27 request B
    // waited for A's answer).
    #expect(Array(section(output, "▸ 5.").map(squeezed).prefix(5)) == [
      "refresh: request A asks for the thumbnail, and is slow; meanwhile the owner uploads r6",
      "refresh again while A runs: request B asks at once and supersedes A, whatever A is doing",
      "request A was cancelled: nothing of it can be drawn",
      "request B answers r6: drawn",
      "the cell drew r5 loaded → r5 loading → r6 loaded, and still shows r6",
    ])

    // 6. A failed refresh keeps the thumbnail; the next one brings the new revision.
    #expect(section(output, "▸ 6.").map(squeezed).contains(
      "the cell drew r4 loaded → r4 loading → r4 failed → r4 loading → r5 loaded"))

    // 7. The fling cancels the load of every row that passed while loading: almost everything.
    let fling = section(output, "▸ 7.").map(squeezed)
    let passed = try #require(fling.lazy.compactMap {
      $0.wholeMatch(of: /(\d+) rows passed; the (\d+) still loading when they left were cancelled:/)
    }.first)
    let cancelled = try #require(Int(passed.2))
    #expect(passed.1 == "185" && cancelled >= 150)
    #expect(fling.contains("\(cancelled) cancelled events, \(cancelled) requests cancelled before an answer"))

    // Never more than 6 claimed + 12 idle entries.
    for line in output.split(separator: "\n").map({ squeezed(String($0)) }) {
      if let entries = line.wholeMatch(of: /entries (\d+): (\d+) claimed, (\d+) idle/) {
        #expect(Int(entries.2)! <= 6 && Int(entries.3)! <= 12, "\(line)")
      }
    }

    // The summary: in both columns every load that started ended.
    let summary = section(output, "▸ Summary").map(squeezed)
    func row(_ name: String) throws -> (events: Int, requests: Int?) {
      let numbers = try #require(summary.first { $0.hasPrefix(name + " ") }).split(separator: " ").compactMap { Int($0) }
      return (numbers[0], numbers.count > 1 ? numbers[1] : nil)
    }
    let (started, completed, cancelledLoads, failed) = (try row("loads started"), try row("completed"), try row("cancelled"), try row("failed"))
    #expect(started.events == completed.events + cancelledLoads.events + failed.events)
    #expect(started.requests == completed.requests! + cancelledLoads.requests! + failed.requests!)
    #expect(failed.events == 1 && cancelledLoads.events == 6 + cancelled)
    // Every request is a load of its own, but for step 5's request A, which the refresh's load
    // superseded: the key went on loading, one load in the events (SPEC §5); a load cancelled
    // before it ran made no request.
    #expect(started.requests! <= started.events + 1 && completed.requests == completed.events)
    let evicted = try row("evicted").events
    // 6 in step 3, the fling's, 6 at the close: empty entries go first, so the fling evicts one more;
    // then the 12 idle entries step 12's memory warning drops.
    #expect(evicted == 189 + 12 && evicted <= started.events)
    #expect(summary.contains("started = completed + cancelled + failed, in both columns: every load that started ended"))
    #expect(summary.contains("entries: at most 18 after any scroll, within 6 claimed + 12 idle"))

    // 9. A fling of 200 rows, on simulated time so the figures are exact: with the limit and
    // priorities, rows flung past before their turn send no request, no more than 6 share the
    // link, and the rows where the list stops are drawn before the rows prefetched past them.
    let flings = section(output, "▸ 9.").map(squeezed)
    #expect(Array(flings.dropFirst(2).prefix(4)) == [
      "requests cancelled answered most at once visible rows drawn all 18 drawn",
      "no limit, prefetch claimed as visible 218 200 18 18 704 ms 711 ms",
      "limit 6, visible before prefetch 120 102 18 6 240 ms 720 ms",
      "(times after the list stops)",
    ])

    // 11. A thumbnail the app writes is kept without a request, and an older one is refused
    // (issue 30); 12. a memory warning drops every idle entry at once.
    let edit = section(output, "▸ 11.").map(squeezed)
    #expect(edit.contains { $0.contains(": written r") && $0.contains("(kept); the loader now holds r") })
    #expect(edit.contains { $0.hasSuffix("again: refused, older than the value held") })
    #expect(edit.contains("events 1 loaded") && edit.contains("service no requests"))
    let warning = section(output, "▸ 12.").map(squeezed)
    #expect(warning.contains("12 idle entries, 12 dropped (removeAllIdle); 0 left"))
    #expect(warning.contains("events 12 evicted") && warning.contains("service no requests"))
    #expect(summary.contains { squeezed($0) == "written by the app 1" })

    // 13. A disk copy read asynchronously shows, still loading, while the network loads; then
    // the newer answer replaces it (interim values, issue 30).
    let diskFirst = section(output, "▸ 13.").map(squeezed)
    let frames = try #require(diskFirst.lazy.compactMap { $0.wholeMatch(of: /.+: — loading → r(\d+) loading → r(\d+) loaded/) }.first)
    #expect(Int(frames.1)! < Int(frames.2)!)
    #expect(diskFirst.contains("(1 request; the version rule holds between the copy and the answer)"))

    // 10. A pull to refresh during slow loads sends the fresh requests at once, whatever the
    // stale work does (issue 27, SPEC §5): the fresh rows are drawn one answer after the pull,
    // and no stale answer is drawn after it.
    let refresh = section(output, "▸ 10.").map(squeezed)
    #expect(Array(refresh.dropFirst(1).prefix(3)) == [
      "requests first fresh row drawn all fresh rows drawn stale rows drawn after the pull",
      "requests that stop when cancelled 12 2000 ms 2000 ms 0",
      "work that ignores cancellation 12 2000 ms 2000 ms 0",
    ])
  }

  @Test func readmeOpensWithTheTwoCommandsAndEveryLinkResolves() async throws {
    let root = URL(fileURLWithPath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    // Only the title comes before the first code block, which holds the two set-up commands.
    let start = try #require(lines.firstIndex { $0.hasPrefix("```") })
    #expect(lines[..<start].allSatisfy { $0.isEmpty || $0.hasPrefix("# ") })
    #expect(lines[start] == "```sh")
    let commands = lines[(start + 1)...].prefix { !$0.hasPrefix("```") }.map {
      $0.split(separator: "#", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
    }
    #expect(commands == ["swift run MapViewer", "swift test"])

    // Every relative link in the README and the playgrounds' READMEs points at a file that exists.
    var documents = [root.appendingPathComponent("README.md")]
    for name in ["MapViewer", "Pipelines", "Geocode", "OfflineMapJob", "Thumbnails"] {
      documents.append(root.appendingPathComponent("Playgrounds/\(name)/README.md"))
      #expect(readme.contains("](Playgrounds/\(name)/README.md)"))
    }
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/LoadingResources.md)"))
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/ComposingLoadables.md)"))
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/Jobs.md)"))
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/LoadingKeyedContent.md)"))
    for document in documents {
      let text = try String(contentsOf: document, encoding: .utf8)
      for match in text.matches(of: /\]\(([^)\s]+)\)/) where !match.1.contains("://") {
        let target = document.deletingLastPathComponent().appendingPathComponent(String(match.1))
        #expect(FileManager.default.fileExists(atPath: target.path), "\(document.lastPathComponent): \(match.1)")
      }
    }
  }
}

/// The tiles under `folder/tiles`, as `level/row/column`.
func tileFiles(in folder: URL) throws -> [String] {
  let tiles = folder.appendingPathComponent("tiles").standardizedFileURL.path + "/"
  let paths = FileManager.default.enumerator(atPath: tiles)?.allObjects as? [String] ?? []
  return paths.filter { $0.hasSuffix(".tile") }.map { String($0.dropLast(".tile".count)) }.sorted()
}

@Suite("Playgrounds: server jobs", .timeLimit(.minutes(2)))
struct ServerJobsPlaygroundTests {
  @Test func serverJobsQuitsMidWayAndOnResumeFetchesOnlyTheFinishedServerJobsResult() async throws {
    let folder = temporaryPath("ServerJobs")
    defer { try? FileManager.default.removeItem(at: folder) }
    let requestLog = folder.appendingPathComponent("job-service/requests.log")
    func requests() throws -> [String] {
      try String(contentsOf: requestLog, encoding: .utf8).split(separator: "\n").map(String.init)
    }
    func lines(_ output: String, _ heading: String) -> [String] {
      section(output, heading).map(squeezed).filter { !$0.isEmpty }
    }

    // The first run: the server's job is submitted and followed, then both jobs are saved paused.
    let (first, firstStatus) = try await runPlayground("ServerJobs", arguments: ["--output", folder.path])
    #expect(firstStatus == 0, "\(first)")
    #expect(first.contains("[offline map] LoadableKit.ServerJob: Submitted: the server's job id is j1"))
    #expect(lines(first, "▸ 1.").last == "the server's job j1 is executing, a quarter done or more")
    let quit = lines(first, "▸ 3.")
    #expect(quit.first == "the manager holds 2 jobs, one file each in jobs/")
    #expect(quit.contains { $0.hasPrefix("offline map: paused, server job j1,") })
    let tilesLine = try #require(quit.first { $0.hasPrefix("tiles: paused, checkpoint ") })
    let checkpoint = try #require(Int(tilesLine.split(separator: " ")[3]))
    let saved = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("jobs").path)
    #expect(saved.filter { $0.hasSuffix(".json") }.count == 2, "\(saved)")
    #expect((10..<41).contains(checkpoint), "saved mid-way: \(tilesLine)")
    #expect(first.hasSuffix("    swift run ServerJobs --resume \(folder.path)\n"))
    let firstRequests = try requests()
    #expect(firstRequests.first == "submit GenerateOfflineMap → j1")
    // Two polls fail with 503: the job retries each after a backoff, polling at once, never submitting again.
    let unavailable = "status j1 → 503 Service Unavailable"
    #expect(Array(firstRequests.dropFirst().prefix(3)) == ["status j1 → executing", unavailable, unavailable])
    #expect(firstRequests.dropFirst(4).allSatisfy { $0 == "status j1 → executing" }, "\(firstRequests)")
    #expect(firstRequests.count >= 5)
    let started = lines(first, "▸ 1.")
    #expect(started.contains("[offline map] LoadableKit: Retry 1 in 0.05 seconds after a transient error: 503 Service Unavailable"))
    #expect(started.contains("[offline map] LoadableKit: Retry 2 in 0.1 seconds after a transient error: 503 Service Unavailable"))
    #expect(started.filter { $0 == "[offline map] LoadableKit.ServerJob: Reconnecting to server job j1, last seen executing" }.count == 2)

    // The second run, an hour later: the server's job finished meanwhile.
    let (second, secondStatus) = try await runPlayground("ServerJobs", arguments: ["--resume", folder.path])
    #expect(secondStatus == 0, "\(second)")
    let restored = lines(second, "▸ 1.")
    #expect(restored.count == 2)
    #expect(restored.contains { $0.hasPrefix("org.loadablekit.playgrounds.generate-offline-map: paused, messages: ") })
    #expect(restored.contains("org.loadablekit.playgrounds.fetch-basemap-tiles: paused, messages: 1"))
    // The background status check (issue 29): one status request per server job, recorded and
    // stored without running the work. (New step: the resume's steps are 3 to 5 now, and the
    // server's last messages are posted by the check, so the resume reconnects "last seen succeeded".)
    let checked = lines(second, "▸ 2.")
    #expect(checked.contains("offline map: the job service says succeeded"), "\(checked)")
    #expect(checked.contains("[offline map] job service: Succeeded: wrote offline-map.mmpk"))
    #expect(checked.contains("offline map: paused, server job j1 last seen succeeded; its work did not run, the check is stored"))
    #expect(checked.filter { $0.hasPrefix("requests.log: ") } == ["requests.log: status j1 → succeeded"], "one status request")
    #expect(checked.contains("1 status request for 1 server job, one each: true"))
    #expect(lines(second, "▸ 3.").contains("manager.resumeAll() → 2"))
    let resumed = lines(second, "▸ 3.")
    #expect(resumed.contains("[offline map] LoadableKit.ServerJob: Reconnecting to server job j1, last seen succeeded"))
    #expect(!resumed.contains { $0.hasPrefix("[offline map] job service: ") }, "the check posted them")
    #expect(resumed.contains("[tiles] Continuing from tile \(checkpoint + 1) of 41"))
    #expect(resumed.contains("offline map: succeeded, result offline-map.mmpk, 18,874,368 bytes"))
    #expect(resumed.contains("tiles: succeeded, 41 tiles, resumed from the checkpoint at tile \(checkpoint)"))
    #expect(resumed.contains("the job service's messages in the job, over both runs: 6, each once: true"))
    // The service's log: this run asked for the status once (the check), then the resume fetched
    // the result without asking again; never submitted.
    #expect(try requests() == firstRequests + ["status j1 → succeeded", "result j1 → offline-map.mmpk"])
    #expect(lines(second, "▸ 4.").suffix(2) == [
      "submitted once: true; result fetched once: true",
      "this run asked for the status once (the check), found the job succeeded, and fetched its result: true",
    ])
    #expect(lines(second, "▸ 5.") == ["41 writes for 41 tiles; every tile fetched exactly once: true"])

    // Once more: both jobs were saved finished, and the service is asked nothing.
    let (third, thirdStatus) = try await runPlayground("ServerJobs", arguments: ["--resume", folder.path])
    #expect(thirdStatus == 0)
    #expect(third.contains("both jobs already finished: start() → false, false; a finished job never runs again"))
    #expect(try requests().count == firstRequests.count + 2)
  }
}
