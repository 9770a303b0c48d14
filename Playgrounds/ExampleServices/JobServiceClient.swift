import Foundation
import LoadableKit

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The job service of an `example-server` (the `Server/` package), over HTTP: the same API as the
/// in-process ``JobService``, so a `ServerJobRunner` drives either.
///
/// Requests go to the server's `/gp` routes through ``HTTPClient``, and map its errors the same
/// way: a cancelled task throws `CancellationError` (its request is cancelled on the wire), an
/// answer other than `2xx` throws ``ServiceError`` with the delay of its `Retry-After`, and a
/// failed connection throws ``NetworkError``. A job error the server sends back
/// (`{"jobError": …}`, such as ``LoadableKit/ServerJobError/Code/jobNotFound`` or
/// ``LoadableKit/ServerJobError/Code/cancelNotSupported``) is thrown as that
/// ``LoadableKit/ServerJobError``.
///
/// Latency and outages are set on ``server`` as for the in-process service, and sent with each
/// request (headers `X-Latency-Ms` and `X-Status`), so the real server waits and fails as the
/// in-process one would. Like ``JobService``, the client appends each request and its outcome to
/// `requests.log` in its directory (``requestLog``), in the same words, so a playground checks
/// the same log both ways; the server logs every request in its own request log too.
public final class JobServiceClient: JobServiceAPI, Sendable {
  /// The latency and outages sent with each request.
  public let server: SimulatedServer
  /// The directory that holds `requests.log`.
  public let directory: URL
  private let client: HTTPClient
  private let log: RequestLogFile

  /// A client for the job service of the server at `baseURL`, logging in `directory`.
  ///
  /// - Parameters:
  ///   - baseURL: The server, such as `http://127.0.0.1:8080`.
  ///   - directory: Where the client keeps `requests.log` (created if needed).
  ///   - latency: How long the server waits before it answers each request.
  /// - Throws: The error of creating `directory`.
  public init(baseURL: URL, directory: URL, latency: Duration = RedlandsServices.defaultLatency) throws {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    self.directory = directory
    log = RequestLogFile(in: directory)
    client = HTTPClient(baseURL: baseURL)
    server = SimulatedServer(name: "job service", latency: latency)
  }

  /// `POST /gp/<task>/submitJob?<parameters>`: starts a job and returns its id.
  nonisolated(nonsending) public func submit(_ request: JobRequest) async throws -> String {
    struct Submitted: Decodable { var jobId: String }
    let query = request.parameters.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
    return try await send("submit \(request.task)", "POST", "\(request.task)/submitJob", query: query, as: Submitted.self)
    { $0.jobId } log: { "submit \(request.task) → \($0)" }
  }

  /// `GET /gp/jobs/<id>?messagesAfter=<n>`: the job's state, progress, and messages after `n`.
  nonisolated(nonsending) public func status(ofJob id: String, messagesAfter sequence: Int) async throws
    -> ServerJobStatus
  {
    try await send(
      "status \(id)", "GET", "jobs/\(id)", query: [URLQueryItem(name: "messagesAfter", value: "\(sequence)")],
      as: ServerJobStatus.self
    ) { $0 } log: { "status \(id) → \($0.state)" }
  }

  /// `POST /gp/jobs/<id>/cancel`: cancels a job that has not finished.
  nonisolated(nonsending) public func cancel(job id: String) async throws -> ServerJobStatus {
    try await send("cancel \(id)", "POST", "jobs/\(id)/cancel", as: ServerJobStatus.self) { $0 } log: {
      "cancel \(id) → \($0.state)"
    }
  }

  /// `GET /gp/jobs/<id>/result`: the result of a job that succeeded.
  nonisolated(nonsending) public func result(ofJob id: String) async throws -> JobResult {
    try await send("result \(id)", "GET", "jobs/\(id)/result", as: JobResult.self) { $0 } log: {
      "result \(id) → \($0.file)"
    }
  }

  /// `POST /admin/jobs/clock?offsetSeconds=<seconds>`: the server's job service clock runs
  /// `seconds` ahead of the wall clock from now on, as the in-process service's clock does when
  /// a playground comes back "an hour later".
  ///
  /// - Throws: What ``HTTPClient/send(_:_:query:headers:)`` throws, and ``ServiceError`` when
  ///   the server refuses.
  nonisolated(nonsending) public func setServerClock(aheadBy seconds: TimeInterval) async throws {
    let path = "/admin/jobs/clock"
    let (_, http) = try await client.send("POST", path, query: [URLQueryItem(name: "offsetSeconds", value: "\(seconds)")])
    guard (200..<300).contains(http.statusCode) else { throw HTTPClient.serviceError(http, path: path) }
  }

  /// Every request so far, with its outcome, one line each, as ``JobService/requestLog`` has them.
  public var requestLog: [String] {
    log.lines
  }

  /// How many requests of `verb` (`submit`, `status`, `cancel`, `result`) the log holds.
  public func requests(_ verb: String) -> Int {
    requestLog.filter { $0.hasPrefix(verb + " ") }.count
  }

  /// The body of an answer that carries a job error.
  private struct CarriedJobError: Decodable { var jobError: ServerJobError }


  /// Sends the request, decodes the answer as `type`, and logs it with its outcome.
  nonisolated(nonsending) private func send<Answer: Decodable, T>(
    _ request: String, _ method: String, _ path: String, query: [URLQueryItem] = [], as type: Answer.Type,
    _ value: (Answer) -> T, log line: (T) -> String
  ) async throws -> T {
    let fullPath = "/gp/" + path
    do {
      let (data, http) = try await client.send(method, fullPath, query: query, headers: server.staging(for: path))
      guard (200..<300).contains(http.statusCode) else {
        if let carried = try? JSONDecoder().decode(CarriedJobError.self, from: data) { throw carried.jobError }
        throw HTTPClient.serviceError(http, path: fullPath)
      }
      let answer = value(try HTTPClient.decode(type, data, path: fullPath))
      log.append(line(answer))
      return answer
    } catch {
      log.append("\(request) → \(describe(error))")
      throw error
    }
  }
}
