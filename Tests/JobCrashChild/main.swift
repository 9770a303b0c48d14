// The child process of the JobManager crash test (`JobsCrashTests`): it runs jobs in a JobManager
// until the test kills it with SIGKILL, or inspects what a killed run left.
//
//   JobCrashChild run <directory> <log> <run>   restore (or create) the jobs, resume them, print
//                                               "restored <name> <status> <checkpoint>" for each,
//                                               then "ready", and work until killed
//   JobCrashChild inspect <directory>           restore only; print "job <name> <status> <checkpoint>"
//                                               per job and "problem <id> <code>" per bad record
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

func describe(_ job: any JobHandle) -> String {
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

do {
  let manager = try JobManager(registry: registry, directory: directory)
  for problem in manager.restoreProblems { print("problem \(problem.id) \(problem.error.code)") }
  switch arguments[1] {
  case "inspect":
    for managed in manager.jobs { print("job \(describe(managed.job))") }
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
    for managed in manager.jobs { print("restored \(describe(managed.job))") }
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
