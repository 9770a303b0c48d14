/// A ``JobWork`` that runs a job on a server with a ``ServerJobRunner``, and says which runner, so
/// that ``JobManager/checkServerJobs()`` can ask the server about the job without running the
/// work.
///
/// ```swift
/// struct GenerateOfflineMap: ServerJobWork {
///   static let kind = "com.example.generate-offline-map"
///   var parameters: OfflineMapParameters
///
///   var runner: ServerJobRunner<OfflineMapJobs> { ServerJobRunner(service: App.offlineMapJobs) }
///
///   func run(in context: JobContext<ServerJobCheckpoint>) async throws -> OfflineMapPackage {
///     try await runner.run(submitting: parameters, in: context)
///   }
/// }
/// ```
public protocol ServerJobWork: JobWork where Checkpoint == ServerJobCheckpoint {
  /// The server's job API.
  associatedtype Service: ServerJobService
  /// The runner that ``JobWork/run(in:)`` runs the job with; a status check asks its
  /// ``ServerJobRunner/service`` and posts the server's messages with its
  /// ``ServerJobRunner/serverMessageSource``.
  var runner: ServerJobRunner<Service> { get }
}

/// What ``JobManager/checkServerJobs()`` found out about one server job.
public struct ServerJobCheck: Sendable {
  /// The job's identifier in the manager.
  public var id: String
  /// The status the server reported (recorded in the job and stored), or why the request failed
  /// (`CancellationError` when the check was cancelled; nothing was recorded then).
  public var result: Result<ServerJobStatus, any Error>

  /// Creates a check's report.
  public init(id: String, result: Result<ServerJobStatus, any Error>) {
    self.id = id
    self.result = result
  }
}

/// A job that can ask its server about its server job without running its work.
protocol ServerStatusCheckable: AnyObject, Sendable {
  /// Asks the server once and records what it says; `nil` when there is nothing to ask (no server
  /// job yet, the server's job already finished, or the work is running or not settled).
  nonisolated(nonsending) func checkServerStatus() async -> Result<ServerJobStatus, any Error>?
}

extension Job: ServerStatusCheckable where Work: ServerJobWork {
  nonisolated(nonsending) func checkServerStatus() async -> Result<ServerJobStatus, any Error>? {
    guard let (checkpoint, generation) = withState({ $0.checkableCheckpoint() }),
      !checkpoint.lastState.isFinished
    else { return nil }
    let runner = work.runner
    let status: ServerJobStatus
    do {
      status = try await runner.service.status(ofJob: checkpoint.serverJobID, messagesAfter: checkpoint.messagesSeen)
      try Task.checkCancellation()  // a deadline that passed: record nothing
    } catch {
      return .failure(error)
    }
    var updated = checkpoint
    let (fresh, changed) = updated.absorb(status)
    if changed {
      let messages = fresh.map { JobMessage($0.text, severity: $0.severity, source: runner.serverMessageSource) }
      // Recorded only if the work has not moved on meanwhile (it polls for itself then).
      let (applied, effects) = withState { $0.saveCheckpointIfSettled(updated, posting: messages, generation: generation) }
      perform(consume effects)
      guard applied else { return .success(status) }
    }
    if let progress = status.progress, signals.raiseProgress(to: progress), signals.needsPublishing() { publishProgress() }
    return .success(status)
  }
}
