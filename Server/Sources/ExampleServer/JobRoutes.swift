import ExampleServices
import Foundation
import Hummingbird
import LoadableKit

/// The job service over HTTP, under `/gp` (a geoprocessing server), backed by the same
/// ``ExampleServices/JobService`` the playgrounds run in-process:
///
/// - `POST /gp/<task>/submitJob?<parameter>=<value>…`: submits a job; answers `{"jobId": "j1"}`.
/// - `GET /gp/jobs/<id>?messagesAfter=<n>`: the job's ``LoadableKit/ServerJobStatus``, with its
///   progress and the messages after `n`.
/// - `POST /gp/jobs/<id>/cancel`: cancels the job; answers its status.
/// - `GET /gp/jobs/<id>/result`: the ``ExampleServices/JobResult`` of a job that succeeded
///   (`409` before).
/// - `POST /admin/jobs/clock?offsetSeconds=3600`: the service's clock runs that far ahead of the
///   wall clock from now on, so a playground can come back "an hour later" without waiting.
///
/// A ``LoadableKit/ServerJobError`` is answered with `404` (``LoadableKit/ServerJobError/Code/jobNotFound``)
/// or `409`, and the body `{"jobError": {"code": …, "message": …}}` so a client can throw it again.
/// Latency and outages come from ``Staging`` (service name `gp`), as for every other service.
final class JobRoutes: Sendable {
  private let service: JobService
  private let clockOffset: Locked<TimeInterval>

  /// Opens a job service whose jobs are kept in `directory`.
  init(directory: URL) throws {
    let offset = Locked<TimeInterval>(0)
    clockOffset = offset
    service = try JobService(directory: directory, latency: .zero, now: { Date().addingTimeInterval(offset.withLock { $0 }) })
  }

  /// Makes the service's clock run `seconds` ahead of the wall clock.
  func setClockOffset(_ seconds: TimeInterval) {
    clockOffset.withLock { $0 = seconds }
  }

  /// The JSON answer to `method` `path` (the path after `/gp`) with `query`.
  ///
  /// - Throws: ``ExampleServices/ServiceError`` (`404` for an unknown path, `405` for a wrong
  ///   method, `409` for the result of a job that has not succeeded),
  ///   ``LoadableKit/ServerJobError`` from the service.
  func answer(method: String, path: String, query: Parameters) async throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let parts = path.split(separator: "/").map(String.init)
    func expect(_ expected: String) throws {
      guard method == expected else { throw ServiceError(code: 405, reason: "Method Not Allowed", path: path) }
    }
    switch parts.count {
    case 2 where parts[1] == "submitJob":
      try expect("POST")
      var parameters: [String: String] = [:]
      for (name, value) in query { parameters[String(name)] = String(value) }
      let id = try await service.submit(JobRequest(task: parts[0], parameters: parameters))
      return try encoder.encode(["jobId": id])
    case 2 where parts[0] == "jobs":
      try expect("GET")
      let status = try await service.status(ofJob: parts[1], messagesAfter: query.get("messagesAfter", as: Int.self) ?? 0)
      return try encoder.encode(status)
    case 3 where parts[0] == "jobs" && parts[2] == "cancel":
      try expect("POST")
      return try encoder.encode(try await service.cancel(job: parts[1]))
    case 3 where parts[0] == "jobs" && parts[2] == "result":
      try expect("GET")
      return try encoder.encode(try await service.result(ofJob: parts[1]))
    default:
      throw ServiceError.notFound(path)
    }
  }

  /// The status and body that carry `error` to the client.
  static func answer(for error: ServerJobError) -> (Int, Data) {
    let status = error.code == .jobNotFound ? 404 : 409
    let body = (try? JSONEncoder().encode(["jobError": error])) ?? Data()
    return (status, body)
  }
}
