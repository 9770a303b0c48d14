/// The job API of a server that runs long operations itself: submit a job, ask for its status,
/// cancel it, and fetch its result.
///
/// This is the shape of ArcGIS geoprocessing services and of the offline map, geodatabase and
/// tile cache export jobs: the client submits parameters and gets the server's job id, polls the
/// status (messages and progress) until the job ends, then downloads the result. A
/// ``ServerJobRunner`` drives a conforming service from a ``JobWork``; an app implements the
/// protocol over its HTTP client, a test over a scripted fake.
///
/// Every value crossing the API is a value type, and ``ServerJobStatus`` and
/// ``ServerJobMessage`` are `Codable`, so the protocol maps onto a JSON-over-HTTP API.
///
/// ```swift
/// struct OfflineMapJobs: ServerJobService {
///   func submit(_ parameters: OfflineMapParameters) async throws -> String {
///     try await http.post("/generateOfflineMap/submitJob", parameters).jobId
///   }
///   func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus {
///     try await http.get("/jobs/\(id)?messagesAfter=\(sequence)")
///   }
///   func cancel(job id: String) async throws -> ServerJobStatus {
///     try await http.post("/jobs/\(id)/cancel")
///   }
///   func result(ofJob id: String) async throws -> OfflineMapPackage {
///     try await http.download("/jobs/\(id)/result")
///   }
/// }
/// ```
public protocol ServerJobService<Request, Result>: Sendable {
  /// The parameters of a job, as submitted.
  associatedtype Request: Sendable
  /// What a job that succeeded produces, as fetched by ``result(ofJob:)``.
  associatedtype Result: Sendable

  /// Submits a job and returns the id the server gave it.
  ///
  /// ``ServerJobRunner`` calls it from a task that is not cancelled, so that a job the server
  /// accepted always has its id saved and can be cancelled on the server.
  ///
  /// - Throws: Any error; a transient one (by the ``JobOptions`` of the job) submits again.
  nonisolated(nonsending) func submit(_ request: Request) async throws -> String

  /// The status of job `id`, with the messages whose ``ServerJobMessage/sequence`` is greater
  /// than `sequence`.
  ///
  /// A server that cannot filter its messages may return all of them: the runner posts each
  /// sequence number only once.
  ///
  /// - Throws: Any error; a transient one (by the ``JobOptions`` of the job) is retried within
  ///   the job's transient-error window.
  nonisolated(nonsending) func status(ofJob id: String, messagesAfter sequence: Int) async throws -> ServerJobStatus

  /// Asks the server to cancel job `id`, and returns the status it answered with.
  ///
  /// - Throws: ``ServerJobError/Code/cancelNotSupported`` when the server cannot cancel the job,
  ///   or any other error when the request failed.
  nonisolated(nonsending) func cancel(job id: String) async throws -> ServerJobStatus

  /// Fetches (downloads) the result of job `id`, which succeeded.
  ///
  /// - Throws: Any error; a transient one (by the ``JobOptions`` of the job) is retried within
  ///   the job's transient-error window; the retry fetches the result again without asking for
  ///   the status (the checkpoint says the server's job succeeded).
  nonisolated(nonsending) func result(ofJob id: String) async throws -> Result
}
