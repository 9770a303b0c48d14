// The child process of the JobManager crash test (`JobsCrashTests`): it runs jobs in a JobManager
// until the test kills it with SIGKILL, or inspects what a killed run left.
//
//   JobCrashChild run <directory> <log> <run>   restore (or create) the jobs, resume them, print
//                                               "restored <name> <status> <checkpoint>" for each,
//                                               then "ready", and work until killed
//   JobCrashChild inspect <directory>           restore only; print "job <name> <status> <checkpoint>"
//                                               per job and "problem <id> <code>" per bad record
//
// Both modes print the server job (its work a ServerJobRunner over a stateless fake server that
// sends one message per poll) as "server S <status> <messages seen> <numbers of the server
// messages in its log>", so the test checks that every message it counts as seen is there once.
//
// Each unit of work appends "<name> <unit> <run>" to the log with O_APPEND and fsync before its
// checkpoint is saved, so the log tells which units ran, and in which run.
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import Foundation
import LoadableKit

/// The test process: when it is gone (a test run that was cancelled or crashed), so is this one.
let parent = getppid()

nonisolated(unsafe) var logDescriptor: Int32 = -1
nonisolated(unsafe) var runNumber = "0"

struct CrashWork: JobWork {
  static let kind = "test.crash"
  var name: String
  var units: Int

  func run(in context: JobContext<Int>) async throws -> Int {
    var next = context.checkpoint ?? 0
    while next < units {
      try await context.pausePoint()
      let line = Array("\(name) \(next) \(runNumber)\n".utf8)
      _ = line.withUnsafeBytes { write(logDescriptor, $0.baseAddress, $0.count) }
      fsync(logDescriptor)
      next += 1
      context.saveCheckpoint(next)
      context.reportProgress(completed: next, total: units)
    }
    return next
  }
}

/// A stateless fake server for the server job: its job `s1` has one new message per poll, derived
/// from what the client says it has seen — the status after `n` messages holds message `n + 1`,
/// "server message <n + 1>" — until message ``messages``, then it succeeds. A process that dies
/// and comes back finds the same server: what was lost is lost on the client's side.
struct CountingServer: ServerJobService {
  static let messages = 400

  nonisolated(nonsending) func submit(_ request: String) async throws -> String { "s1" }

  nonisolated(nonsending) func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus {
    guard sequence < Self.messages else { return ServerJobStatus(state: .succeeded, messages: [], progress: 1) }
    let next = sequence + 1
    return ServerJobStatus(
      state: next == Self.messages ? .succeeded : .executing,
      messages: [ServerJobMessage(sequence: next, text: "server message \(next)")],
      progress: Double(next) / Double(Self.messages))
  }

  nonisolated(nonsending) func cancel(job id: String) async throws -> ServerJobStatus {
    ServerJobStatus(state: .cancelled, messages: [], progress: nil)
  }

  nonisolated(nonsending) func result(ofJob id: String) async throws -> Int { Self.messages }
}

/// The server job: polls ``CountingServer`` every 2 ms, each poll bringing one new message.
struct CrashServerWork: JobWork {
  static let kind = "test.crash.server"
  var name: String

  func run(in context: JobContext<ServerJobCheckpoint>) async throws -> Int {
    let runner = ServerJobRunner(service: CountingServer(), pollSchedule: .constant(.milliseconds(2)), serverMessageSource: "server")
    return try await runner.run(submitting: name, in: context)
  }
}

/// A server job as "server <name> <status> <messages seen> <server messages in its log>", the
/// last a comma-separated list of their numbers in the log's order ("-" for none).
func describeServerJob(_ job: Job<CrashServerWork>) -> String {
  let numbers = job.messages.filter { $0.source == "server" }.map { String($0.text.split(separator: " ").last ?? "?") }
  let seen = job.checkpoint?.messagesSeen ?? 0
  return "server \(job.work.name) \(job.status.rawValue) \(seen) \(numbers.isEmpty ? "-" : numbers.joined(separator: ","))"
}

func describe(_ job: any JobHandle) -> String {
  if let server = job as? Job<CrashServerWork> { return describeServerJob(server) }
  let checkpoint = (job as? Job<CrashWork>)?.checkpoint.map(String.init) ?? "none"
  let name = (job as? Job<CrashWork>)?.work.name ?? "?"
  return "\(name) \(job.status.rawValue) \(checkpoint)"
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
  print("usage: JobCrashChild run <directory> <log> <run> | inspect <directory>")
  exit(64)
}
let directory = URL(fileURLWithPath: arguments[2], isDirectory: true)
var registry = JobRegistry()
registry.register(CrashWork.self)
// The job's messages are all kept: a server message missing from the log is one that was lost.
registry.register(CrashServerWork.self, options: JobOptions(messageLimit: 10_000))

do {
  let manager = try JobManager(registry: registry, directory: directory)
  for problem in manager.restoreProblems { print("problem \(problem.id) \(problem.error.code)") }
  switch arguments[1] {
  case "inspect":
    for managed in manager.jobs {
      print(managed.job is Job<CrashServerWork> ? describe(managed.job) : "job \(describe(managed.job))")
    }
    exit(0)
  case "run" where arguments.count == 5:
    logDescriptor = open(arguments[3], O_WRONLY | O_APPEND | O_CREAT, 0o644)
    runNumber = arguments[4]
    // A job that finishes within the first runs, one that never finishes, and a short one; a run
    // killed while adding them left some of them only.
    let present = Set(manager.jobs.compactMap { ($0.job as? Job<CrashWork>)?.work.name })
    for (name, units) in [("A", 60), ("B", 10_000_000), ("C", 3)] where !present.contains(name) {
      try manager.add(Job(CrashWork(name: name, units: units)))
    }
    // And a server job, whose server sends a message per poll: "server S <status> <seen> <numbers>".
    if !manager.jobs.contains(where: { $0.job is Job<CrashServerWork> }) {
      try manager.add(Job(CrashServerWork(name: "S"), options: JobOptions(messageLimit: 10_000)))
    }
    for managed in manager.jobs {
      print(managed.job is Job<CrashServerWork> ? describe(managed.job) : "restored \(describe(managed.job))")
    }
    fflush(nil)  // before any unit runs, so a kill cannot lose these lines but keep a unit's
    for managed in manager.jobs where managed.job.status == .notStarted || managed.job.status == .paused {
      managed.job.start()
    }
    print("ready")
    fflush(nil)
    // The jobs work on their own tasks until the test kills this process, within a few hundred
    // milliseconds. Nothing may outlive the test run: a child whose test process is gone, or
    // that nobody killed in five minutes, ends itself.
    var waited = 0
    while getppid() == parent && waited < 300 {
      sleep(1)
      waited += 1
    }
    print("error: nobody killed this run")
    exit(70)
  default:
    print("unknown mode \(arguments[1])")
    exit(64)
  }
} catch {
  print("error \(error)")
  exit(1)
}
