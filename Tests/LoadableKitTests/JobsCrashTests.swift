#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import Foundation
import LoadableKitTesting
import Testing

/// Crash consistency of `JobManager` with its `DirectoryJobStore`: the `JobCrashChild` executable
/// runs three jobs and is killed with SIGKILL at a seeded random moment, 200 times on one
/// directory; each run restores what the previous one left. The work appends every unit it runs to
/// a log (O_APPEND + fsync) before saving the checkpoint after it, so the log shows which units ran
/// twice. A fourth job runs on a (stateless, fake) server that sends one message per poll: each
/// restore, and the last, must hold every server message its checkpoint counts as seen, once.
@Suite("Jobs: crash consistency", .timeLimit(.minutes(2)))
struct JobsCrashTests {
  static let runs = 200
  /// Kill moments, from the child's launch: up to 150 ms, which covers the restore at startup and
  /// the first units of work.
  static let latestKill: UInt64 = 150_000

  struct Figures: CustomStringConvertible {
    var runs = 0
    var killedBeforeReady = 0
    var unitsRun = 0
    var unitsRedone = 0
    /// Runs whose restore found the server job still polling.
    var serverRuns = 0
    /// The server messages the last restore counts as seen.
    var serverMessages = 0
    /// Server messages counted as seen but missing from the job's log, the most a restore found.
    var serverMessagesLost = 0
    /// Server messages in the job's log more than once, or not counted as seen, the most a restore found.
    var serverMessagesExtra = 0
    /// Log lines a kill cut short (see ``JobsCrashTests/records(in:)``).
    var tornWrites = 0
    var description: String {
      "\(runs) runs killed (\(killedBeforeReady) before the jobs started), \(unitsRun) units run, \(unitsRedone) run twice,"
        + " \(tornWrites) log lines cut short;"
        + " server job polling in \(serverRuns) runs, \(serverMessages) server messages, \(serverMessagesLost) lost,"
        + " \(serverMessagesExtra) extra"
    }

    /// Checks a "server <name> <status> <seen> <numbers>" line: the log holds messages 1…seen,
    /// once each, in order. Returns whether the job was still polling.
    @discardableResult
    mutating func checkServerLine(_ line: String, _ context: String) -> Bool {
      let parts = line.split(separator: " ").map(String.init)
      guard parts.count == 5, let seen = Int(parts[3]) else {
        Issue.record("\(context): a malformed server line: \(line)")
        return false
      }
      let numbers = parts[4] == "-" ? [] : parts[4].split(separator: ",").compactMap { Int($0) }
      let present = Set(numbers)
      let lost = (0..<seen).count { !present.contains($0 + 1) }
      let extra = (numbers.count - present.count) + present.count { $0 > seen }  // twice, or not counted
      // A lost message stays lost (the server is not asked for it again): the most any restore
      // found is how many were lost in all.
      serverMessagesLost = max(serverMessagesLost, lost)
      serverMessagesExtra = max(serverMessagesExtra, extra)
      serverMessages = seen
      #expect(numbers == Array(0..<seen).map { $0 + 1 }, "\(context): \(parts[1]) counts \(seen) server messages as seen; its log holds \(parts[4])")
      return parts[2] != "succeeded"
    }
  }

  static func child(_ arguments: [String]) -> Process {
    let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    let process = Process()
    process.executableURL = directory.appendingPathComponent("JobCrashChild")
    process.arguments = arguments
    return process
  }

  /// Runs `process` and returns its standard output once it has exited. The test waits without
  /// blocking a thread of the cooperative pool: the suite runs beside every other one, and a
  /// blocked pool thread (of two, on a 2-core machine) starves them.
  static func output(of process: Process, killAfter microseconds: UInt64? = nil) async throws -> String {
    let pipe = Pipe()
    process.standardOutput = pipe
    let (exited, exit) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    process.terminationHandler = { _ in exit.finish() }
    try process.run()
    if let microseconds {
      // The kill moment is the point of the test, not a wait for something to happen. A cancelled
      // test (its time limit) kills at once: the child must not outlive it.
      try? await Task.sleep(for: .microseconds(microseconds))
      kill(process.processIdentifier, SIGKILL)
    }
    for await _ in exited {}
    return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  }

  @Test func killedAtRandomMomentsEveryJobComesBackFromItsLastCheckpoint() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("crash-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let log = directory.appendingPathComponent("units.log").path
    let store = directory.appendingPathComponent("jobs").path
    var generator = SplitMix64(seed: 2026)
    var restoredLines: [[String]] = []
    var figures = Figures()

    for run in 0..<Self.runs {
      let process = Self.child(["run", store, log, "\(run)"])
      let moment = UInt64.random(in: 0...Self.latestKill, using: &generator)
      let output = try await Self.output(of: process, killAfter: moment)
      #expect(process.terminationReason == .uncaughtSignal, "run \(run): \(output)")
      let lines = output.split(separator: "\n").map(String.init)
      #expect(!lines.contains { $0.hasPrefix("error") || $0.hasPrefix("problem") }, "run \(run): \(output)")
      if !lines.contains("ready") { figures.killedBeforeReady += 1 }
      restoredLines.append(lines.filter { $0.hasPrefix("restored ") })
      for line in lines where line.hasPrefix("server ") {
        if figures.checkServerLine(line, "run \(run)") { figures.serverRuns += 1 }
      }
      figures.runs += 1
    }

    // What each run logged, per job: the units in order.
    var logged: [String: [Int: [Int]]] = [:]  // job → run → units
    let (records, torn) = try Self.records(in: String(contentsOfFile: log, encoding: .utf8))
    for record in records {
      logged[record.job, default: [:]][record.run, default: []].append(record.unit)
      figures.unitsRun += 1
    }
    figures.tornWrites = torn

    // Each job resumes from the checkpoint it was restored with and runs its units in order; the
    // next run restores the checkpoint after its last unit, or the one before it when the kill
    // came between the unit and the save: the unit in flight, which runs again.
    var expected: [String: ClosedRange<Int>] = [:]  // the checkpoint the next restore may hold
    for run in 0..<Self.runs {
      var restored: [String: Int] = [:]
      for line in restoredLines[run] {
        let parts = line.split(separator: " ")  // restored <name> <status> <checkpoint>
        restored[String(parts[1])] = parts[3] == "none" ? 0 : Int(parts[3])!
      }
      for (name, value) in restored {
        if let range = expected[name] {
          #expect(range.contains(value), "run \(run): \(name) restored at \(value), expected \(range)")
          if value == range.lowerBound, range.count > 1 { figures.unitsRedone += 1 }
        }
        expected[name] = value...value
      }
      for (name, runs) in logged {
        guard let units = runs[run], !units.isEmpty else { continue }
        let start = try #require(restored[name], "run \(run): \(name) ran without being restored or created")
        #expect(units == Array(start..<(start + units.count)), "run \(run): \(name) ran \(units), from \(start)")
        expected[name] = units.last!...(units.last! + 1)
      }
    }

    // A fresh process restores every job, readable, consistent with the log.
    let inspect = Self.child(["inspect", store])
    let output = try await Self.output(of: inspect)
    #expect(inspect.terminationStatus == 0, "\(output)")
    let jobs = output.split(separator: "\n").filter { $0.hasPrefix("job ") }.map { $0.split(separator: " ") }
    #expect(!output.contains("problem"), "\(output)")
    #expect(Set(jobs.map { String($0[1]) }) == ["A", "B", "C"], "\(output)")
    let serverLines = output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("server ") }
    #expect(serverLines.count == 1, "\(output)")
    for line in serverLines { figures.checkServerLine(line, "the last restore") }
    for job in jobs {
      let name = String(job[1])
      let status = String(job[2])
      let saved = job[3] == "none" ? 0 : Int(job[3])!
      if let range = expected[name] {
        #expect(range.contains(saved), "\(name): checkpoint \(saved), expected \(range)")
        if saved == range.lowerBound, range.count > 1 { figures.unitsRedone += 1 }
      }
      if name == "A" || name == "C" {
        #expect(status == "succeeded" || saved < (name == "A" ? 60 : 3), "\(name) is \(status) at \(saved)")
      } else {
        #expect(status == "paused" || status == "notStarted", "\(name) is \(status)")
      }
    }
    print("JobManager crash test: \(figures)")
    #expect(figures.runs == Self.runs)
    #expect(figures.tornWrites <= figures.runs, "at most the write in flight when each run was killed")
    #expect(figures.unitsRedone <= figures.runs * 3, "at most the unit in flight of each job per kill")
    #expect(figures.serverRuns > 0 && figures.serverMessages > 0, "the server job polled")
    #expect(figures.serverMessagesLost == 0)
    #expect(figures.serverMessagesExtra == 0)
  }

  /// The records of the units log, "<job> <unit> <run>" a line.
  ///
  /// A write that a kill cut short leaves the start of its record without the newline: Linux may
  /// return a short write to a regular file when a fatal signal comes while it copies the data
  /// (seen here once: "B 5148 B 5148 100", the first "B 5148 " cut from run 99's record). The
  /// next record is then appended right after it, on the same line. That unit was in flight, its
  /// checkpoint not saved: it runs again, like a unit killed before its write. So a line is a
  /// cut-short fragment, if any, then one whole record; the last line may be a fragment alone.
  /// Anything else is an error.
  static func records(in text: String) throws -> (records: [(job: String, unit: Int, run: Int)], torn: Int) {
    let record = /^(?<fragment>.*?)(?<job>[A-Z]) (?<unit>\d+) (?<run>\d+)$/
    let fragment = /^[A-Z]( \d*( \d*)?)?$/
    var records: [(job: String, unit: Int, run: Int)] = []
    var torn = 0
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    for (index, line) in lines.enumerated() where !line.isEmpty {
      if let match = line.wholeMatch(of: record),
        match.fragment.isEmpty || match.fragment.wholeMatch(of: fragment) != nil,
        let unit = Int(match.unit), let run = Int(match.run)
      {
        records.append((String(match.job), unit, run))
        if !match.fragment.isEmpty { torn += 1 }
      } else if index == lines.count - 1, line.wholeMatch(of: fragment) != nil {
        torn += 1  // cut short by the last kill, and nothing written after it
      } else {
        throw MalformedLog(line: String(line))
      }
    }
    return (records, torn)
  }

  struct MalformedLog: Error, CustomStringConvertible {
    var line: String
    var description: String { "a malformed log line: \(line)" }
  }

  @Test func aLogLineCutShortByAKillIsTheUnitInFlightNotARecord() throws {
    let (records, torn) = try Self.records(in: "A 1 0\nB 5148 B 5148 100\nB 51A 3 100\nC 2 4\nB 7")
    #expect(records.map { "\($0.job) \($0.unit) \($0.run)" } == ["A 1 0", "B 5148 100", "A 3 100", "C 2 4"])
    #expect(torn == 3)
    #expect(try Self.records(in: "A 1 0\n").torn == 0)
    for malformed in ["A 1 0 7", "A 1\nC 2 4", "x A 1 0", "A 1 0\nB\nC 2 4", "a 1 0"] {
      #expect(throws: MalformedLog.self, "\(malformed)") { try Self.records(in: malformed) }
    }
  }
}
