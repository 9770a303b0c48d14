import Foundation
import LoadableKit

/// A job to submit to the ``JobService``: one of its tasks, with parameters.
public struct JobRequest: Codable, Sendable, Hashable {
  /// The name of the task, such as `"GenerateOfflineMap"` (see `Data/job-service.json`).
  public var task: String
  /// The task's parameters, such as the area's name.
  public var parameters: [String: String]

  public init(task: String, parameters: [String: String] = [:]) {
    self.task = task
    self.parameters = parameters
  }
}

/// What a job of the ``JobService`` produced, as its result request returns it.
public struct JobResult: Codable, Sendable, Hashable {
  public var jobID: String
  public var task: String
  /// The name of the file the job wrote.
  public var file: String
  public var bytes: Int
  public var parameters: [String: String]

  public init(jobID: String, task: String, file: String, bytes: Int, parameters: [String: String]) {
    self.jobID = jobID
    self.task = task
    self.file = file
    self.bytes = bytes
    self.parameters = parameters
  }
}

/// The API of the job service: LoadableKit's `ServerJobService` with Codable requests and
/// results, so an HTTP client can implement it as well as the in-process ``JobService``.
public protocol JobServiceAPI: ServerJobService where Request == JobRequest, Result == JobResult {}

/// A simulated geoprocessing server that runs jobs (offline maps, tile cache exports) on its own.
///
/// Its jobs go on whether anyone asks about them or not, even while no client process runs: the
/// service keeps its jobs in `jobs.json` in its directory (each write atomic), and computes a
/// job's state, progress and messages from the time elapsed since it was submitted, on its clock.
/// A second process that opens the same directory finds the jobs, finished if their time is up.
/// Every request is appended to `requests.log` in that directory, so anyone can check what was
/// asked across runs (``requestLog``).
///
/// Requests go through a ``SimulatedServer`` (``server``): latency, and outages on demand
/// (`503 Service Unavailable`).
public final class JobService: JobServiceAPI, Sendable {
  struct TaskInfo: Decodable, Sendable {
    var title: String
    var seconds: Double
    var cancellable: Bool
    var steps: [String]
    var output: String
    var bytes: Int
  }

  private struct Catalog: Decodable {
    var root: String
    var tasks: [String: TaskInfo]
  }

  /// A job as the service stores it.
  struct StoredJob: Codable, Sendable {
    var id: String
    var request: JobRequest
    var submitted: Date
    var cancelled: Date?
  }

  struct Stored: Codable, Sendable {
    var nextID = 1
    var jobs: [String: StoredJob] = [:]
  }

  /// The network in front of the service: latency and outages.
  public let server: SimulatedServer
  /// The directory that holds `jobs.json` and `requests.log`.
  public let directory: URL
  private let log: RequestLogFile
  private let now: @Sendable () -> Date
  private let tasks: [String: TaskInfo]
  private let state: Locked<Stored>

  /// Opens the service whose state is in `directory` (created if needed).
  ///
  /// - Parameters:
  ///   - directory: Where the service keeps its jobs and its request log.
  ///   - latency: How long every request takes.
  ///   - now: The service's clock; the wall clock by default. A later run may pass a clock moved
  ///     on, to come back "an hour later" without waiting an hour.
  public init(
    directory: URL, latency: Duration = RedlandsServices.defaultLatency,
    now: @escaping @Sendable () -> Date = { Date() }
  ) throws {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    self.directory = directory
    log = RequestLogFile(in: directory)
    self.now = now
    server = SimulatedServer(name: "job service", latency: latency)
    tasks = ExampleData.bundled(Catalog.self, from: "job-service.json").tasks
    let file = directory.appendingPathComponent("jobs.json")
    let stored =
      FileManager.default.fileExists(atPath: file.path)
      ? try JSONDecoder().decode(Stored.self, from: Data(contentsOf: file)) : Stored()
    state = Locked(stored)
  }

  /// The tasks the service runs, by name.
  public var taskNames: [String] { tasks.keys.sorted() }

  // MARK: - The API

  /// `POST /<task>/submitJob`: starts a job and returns its id.
  public func submit(_ request: JobRequest) async throws -> String {
    try await respond("submit \(request.task)", path: "\(request.task)/submitJob") {
      guard tasks[request.task] != nil else { throw ServiceError.notFound(request.task) }
      return try state.withLock { stored in
        let id = "j\(stored.nextID)"
        stored.nextID += 1
        stored.jobs[id] = StoredJob(id: id, request: request, submitted: now())
        try save(stored)
        return id
      }
    } log: { "submit \(request.task) → \($0)" }
  }

  /// `GET /jobs/<id>?messagesAfter=<n>`: the job's state, progress, and messages after `n`.
  public func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus {
    try await respond("status \(id)", path: "jobs/\(id)") {
      var status = try report(id)
      status.messages.removeAll { $0.sequence <= sequence }
      return status
    } log: { "status \(id) → \($0.state)" }
  }

  /// `POST /jobs/<id>/cancel`: cancels a job that has not finished. A task that cannot be
  /// cancelled answers ``LoadableKit/ServerJobError/cancelNotSupported``.
  public func cancel(job id: String) async throws -> ServerJobStatus {
    try await respond("cancel \(id)", path: "jobs/\(id)/cancel") {
      let before = try report(id)
      guard !before.state.isFinished else { return before }
      guard let job = state.withLock({ $0.jobs[id] }), tasks[job.request.task]?.cancellable == true else {
        throw ServerJobError(code: .cancelNotSupported, message: "the job service cannot cancel \(id)")
      }
      try state.withLock { stored in
        stored.jobs[id]?.cancelled = now()
        try save(stored)
      }
      return try report(id)
    } log: { "cancel \(id) → \($0.state)" }
  }

  /// `GET /jobs/<id>/result`: the result of a job that succeeded.
  public func result(ofJob id: String) async throws -> JobResult {
    try await respond("result \(id)", path: "jobs/\(id)/result") {
      guard try report(id).state == .succeeded, let job = state.withLock({ $0.jobs[id] }),
        let task = tasks[job.request.task]
      else { throw ServiceError(code: 409, reason: "Conflict: the job has not succeeded", path: "jobs/\(id)/result") }
      return JobResult(
        jobID: id, task: job.request.task, file: task.output, bytes: task.bytes, parameters: job.request.parameters)
    } log: { "result \(id) → \($0.file)" }
  }

  // MARK: - The log

  /// Every request so far, in every process that used this directory, one line each:
  /// `submit GenerateOfflineMap → j1`, `status j1 → executing`, `result j1 → offline-map.mmpk`,
  /// or `… → 503 Service Unavailable` for a request that failed.
  public var requestLog: [String] {
    log.lines
  }

  /// How many requests of `verb` (`submit`, `status`, `cancel`, `result`) the log holds.
  public func requests(_ verb: String) -> Int {
    requestLog.filter { $0.hasPrefix(verb + " ") }.count
  }

  // MARK: - Jobs, by the clock

  /// The job's status now, computed from the time since it was submitted.
  func report(_ id: String) throws -> ServerJobStatus {
    guard let job = state.withLock({ $0.jobs[id] }), let task = tasks[job.request.task] else {
      throw ServerJobError(code: .jobNotFound, message: "the job service has no job \(id)")
    }
    let end = job.cancelled ?? now()
    let fraction = task.seconds > 0 ? min(1, max(0, end.timeIntervalSince(job.submitted) / task.seconds)) : 1
    let area = job.request.parameters["area"].map { " of \($0)" } ?? ""
    // Message 1 at submission, the steps evenly through the run, the last one at the end.
    var texts = [(0.0, "Submitted: \(task.title)\(area)")]
    for (index, step) in task.steps.enumerated() {
      texts.append((Double(index + 1) / Double(task.steps.count + 1), step))
    }
    texts.append((1, "Succeeded: wrote \(task.output)"))
    var messages = texts.enumerated().filter { $0.element.0 <= fraction }.map {
      ServerJobMessage(sequence: $0.offset + 1, text: $0.element.1)
    }
    let state: ServerJobStatus.State
    if job.cancelled != nil && fraction < 1 {
      state = .cancelled
      messages.append(ServerJobMessage(sequence: texts.count + 1, text: "Cancelled at the client's request", severity: .warning))
    } else {
      state = fraction >= 1 ? .succeeded : fraction > 0 ? .executing : .submitted
    }
    return ServerJobStatus(state: state, messages: messages, progress: fraction)
  }

  // MARK: - Storage


  /// Writes the jobs to `jobs.json` atomically (a temporary file, then a rename).
  private func save(_ stored: Stored) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
    try encoder.encode(stored).write(to: directory.appendingPathComponent("jobs.json"), options: .atomic)
  }

  /// Answers a request through the simulated network, and logs it with its outcome.
  private func respond<T: Sendable>(
    _ request: String, path: String, _ answer: () throws -> T, log line: (T) -> String
  ) async throws -> T {
    do {
      let value = try await server.respond(to: path, answer)
      log.append(line(value))
      return value
    } catch {
      log.append("\(request) → \(describe(error))")
      throw error
    }
  }
}
