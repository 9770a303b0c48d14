import Foundation
import Testing

/// Runs a playground's built binary (the test target depends on the executables, so they are
/// built next to the test bundle) and returns what it printed.
func runPlayground(_ name: String, arguments: [String] = []) throws -> (output: String, status: Int32) {
  let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
  let process = Process()
  process.executableURL = directory.appendingPathComponent(name)
  process.arguments = arguments
  let pipe = Pipe()
  process.standardOutput = pipe
  process.standardError = pipe
  try process.run()
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
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

@Suite("Playgrounds", .timeLimit(.minutes(2)))
struct PlaygroundTests {
  @Test func quickStartWalksThroughTheStates() throws {
    let (output, status) = try runPlayground("QuickStart")
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

  @Test func mapViewerTracesTheOutageTheRetryTheCancelAndTheOverride() throws {
    let (output, status) = try runPlayground("MapViewer")
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
  }

  @Test func pipelinesRetryThroughTheChainStayLiveAndFailFast() throws {
    let (output, status) = try runPlayground("Pipelines")
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

  @Test func geocodeRunsOneTaskOnlineAndOfflineAndFallsBack() throws {
    let (output, status) = try runPlayground("Geocode")
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

  @Test func readmeOpensWithTheTwoCommandsAndEveryLinkResolves() throws {
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
    for name in ["MapViewer", "Pipelines", "Geocode"] {
      documents.append(root.appendingPathComponent("Playgrounds/\(name)/README.md"))
      #expect(readme.contains("](Playgrounds/\(name)/README.md)"))
    }
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/LoadingResources.md)"))
    #expect(readme.contains("](Sources/LoadableKit/LoadableKit.docc/ComposingLoadables.md)"))
    for document in documents {
      let text = try String(contentsOf: document, encoding: .utf8)
      for match in text.matches(of: /\]\(([^)\s]+)\)/) where !match.1.contains("://") {
        let target = document.deletingLastPathComponent().appendingPathComponent(String(match.1))
        #expect(FileManager.default.fileExists(atPath: target.path), "\(document.lastPathComponent): \(match.1)")
      }
    }
  }
}
