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
}
