/// Runs a job on a server from a ``JobWork``: submits it, follows it with polls on a schedule,
/// mirrors its messages and progress, cancels it on the server, and fetches its result.
///
/// The work's checkpoint is a ``ServerJobCheckpoint``, and its ``JobWork/run(in:)`` hands the
/// context to ``run(submitting:in:)``:
///
/// ```swift
/// struct GenerateOfflineMap: JobWork {
///   static let kind = "com.example.generate-offline-map"
///   var parameters: OfflineMapParameters
///
///   func run(in context: JobContext<ServerJobCheckpoint>) async throws -> OfflineMapPackage {
///     let runner = ServerJobRunner(service: App.offlineMapJobs)   // the app's HTTP client
///     return try await runner.run(submitting: parameters, in: context)
///   }
/// }
/// ```
///
/// What the runner does, with the ``Job`` around it:
///
/// - **Submit.** On a first run it submits the request and saves the server's job id as the
///   checkpoint before anything else, so a job persisted from then on knows its server job; in a
///   ``JobManager`` the next pause point waits until the id is stored.
///   The submission runs to its end even when the job is cancelled meanwhile: the job the server
///   accepted is then cancelled on the server, never left behind unknown.
/// - **Poll.** It asks for the status after each delay of ``pollSchedule`` on ``clock`` (by
///   default 1 s, 2 s, 4 s … up to 30 s): the longer the job runs, the less often. A run that
///   starts from a checkpoint (a job restored from JSON, or a retry after a transient error)
///   and a job resumed after ``Job/pause()`` ask at once, and the schedule starts over — also
///   when the resume comes in the middle of the wait for the next poll, which it ends.
/// - **Messages and progress.** Each server message is posted once as a ``JobMessage`` with the
///   source ``serverMessageSource``: the checkpoint keeps the highest message number posted,
///   across polls, retries and restores. The server's progress is the job's.
/// - **Pause.** A paused job stops polling at its next poll while the server goes on; it counts
///   as parked while it waits for that poll (``Job/waitUntilParked()`` and
///   ``JobManager/pauseAll()`` return at once); ``Job/start()`` asks for the status at once, so a job that
///   finished on the server meanwhile is not submitted again: its result is fetched. A job whose
///   checkpoint already says the server's job succeeded (``JobManager/checkServerJobs()`` found
///   it so) fetches the result without asking for the status again.
/// - **Cancel.** ``Job/cancel()`` cancels the run's task; the runner then asks the server to
///   cancel the job, from a task that is not cancelled, and waits for the answer before the job
///   ends ``JobStatus/failed`` with `CancellationError`. When the server cannot cancel (it throws
///   ``ServerJobError/Code/cancelNotSupported``) or cannot be reached, the runner posts an error
///   message and records the ``ServerJobError`` in ``ServerJobCheckpoint/cancelError``.
/// - **Errors.** An error from a status or result request is thrown to the job: one that the
///   job's ``JobOptions/isTransient`` calls transient is retried within its transient-error
///   window (a retry asks for the status at once and never submits again); any other fails the
///   job. A server job that failed, timed out or was cancelled by someone else fails the job
///   with a ``ServerJobError``.
/// - **Result.** Once the server says the job succeeded, ``ServerJobService/result(ofJob:)``
///   fetches the result, which is the job's output.
///
/// A poll's new messages and the checkpoint that counts them are one update: every saved form of
/// the job — ``Job/toJSON()`` at any moment, a ``JobManager``'s record, which is written at once
/// on each checkpoint — holds both or neither, so a restored job (even after the process was
/// killed) has each server message exactly once.
public struct ServerJobRunner<Service: ServerJobService>: Sendable {
  /// The ``JobMessage/source`` of the messages the runner itself posts (submitted, reconnected,
  /// cancel asked and answered).
  public static var messageSource: String { "LoadableKit.ServerJob" }

  /// The server's job API.
  public var service: Service
  /// The delays between status requests: the first after ``Backoff/initial``, each later one
  /// ``Backoff/multiplier`` times longer, up to ``Backoff/maximum``.
  public var pollSchedule: JobOptions.Backoff
  /// The clock the runner waits on between status requests.
  public var clock: any Clock<Duration>
  /// The ``JobMessage/source`` of the server's messages.
  public var serverMessageSource: String?

  /// Creates a runner.
  ///
  /// - Parameters:
  ///   - service: The server's job API.
  ///   - pollSchedule: The delays between status requests; by default 1 s doubling up to 30 s.
  ///   - clock: The clock to wait on; a `ContinuousClock` by default. Tests pass a test clock.
  ///   - serverMessageSource: The source of the server's messages; `"server"` by default.
  public init(
    service: Service,
    pollSchedule: JobOptions.Backoff = .exponential(initial: .seconds(1), maximum: .seconds(30)),
    clock: any Clock<Duration> = ContinuousClock(),
    serverMessageSource: String? = "server"
  ) {
    self.service = service
    self.pollSchedule = pollSchedule
    self.clock = clock
    self.serverMessageSource = serverMessageSource
  }

  /// Submits `request` (unless the checkpoint holds a server job already), follows the server's
  /// job until it ends, and returns its result.
  ///
  /// Call it from ``JobWork/run(in:)``, with the context the job gave.
  ///
  /// - Parameters:
  ///   - request: The job's parameters. Evaluated only when the job is submitted.
  ///   - context: The run's context; its checkpoint says whether a server job exists.
  /// - Returns: The result of the server's job, fetched once it succeeded.
  /// - Throws: `CancellationError` once the job is cancelled (after the server answered the
  ///   request to cancel); ``ServerJobError`` when the server's job failed, timed out or was
  ///   cancelled by someone else; the service's error when a request failed.
  nonisolated(nonsending) public func run(
    submitting request: @autoclosure () -> Service.Request,
    in context: JobContext<ServerJobCheckpoint>
  ) async throws -> Service.Result {
    var checkpoint: ServerJobCheckpoint
    let reconnecting: Bool
    if let saved = context.checkpoint {
      checkpoint = saved
      reconnecting = true
      context.post(
        "Reconnecting to server job \(saved.serverJobID), last seen \(saved.lastState)", source: Self.messageSource)
    } else {
      try await context.pausePoint()
      let service = self.service
      let request = request()
      // Not cancelled with the job: a job the server accepted must have its id saved.
      let id = try await Task { try await service.submit(request) }.value
      checkpoint = ServerJobCheckpoint(serverJobID: id)
      context.saveCheckpoint(checkpoint)
      reconnecting = false
      context.post("Submitted: the server's job id is \(id)", source: Self.messageSource)
    }
    do {
      // With a JobManager, a pause point returns once the checkpoint is stored: the server's job
      // id is on disk before the first poll.
      if !reconnecting {
        try await context.pausePoint()
        // A status check (`JobManager.checkServerJobs()`) may have marked the server's job
        // finished while the job was paused here: go on from the saved checkpoint.
        if let saved = context.checkpoint { checkpoint = saved }
      }
      return try await follow(&checkpoint, pollAtOnce: reconnecting, in: context)
    } catch where error is CancellationError || Task.isCancelled {
      throw await cancelOnServer(&checkpoint, in: context)
    }
  }

  /// Polls until the server's job ends, then fetches its result.
  nonisolated(nonsending) private func follow(
    _ checkpoint: inout ServerJobCheckpoint, pollAtOnce: Bool, in context: JobContext<ServerJobCheckpoint>
  ) async throws -> Service.Result {
    let id = checkpoint.serverJobID
    var polls = 0
    var pollNow = pollAtOnce
    var lastError: String?
    while true {
      // The server said so already (a status check while the job was paused, or a poll before a
      // result request that failed): a job that succeeded stays so, and only its result is fetched.
      // A success the server reports below ends the same way (the checkpoint absorbed it).
      if checkpoint.lastState == .succeeded {
        try await context.pausePoint()
        return try await service.result(ofJob: id)
      }
      if !pollNow {
        polls += 1
        // Nothing is saved between this wait and the pause point after it: a paused job counts as
        // parked while it waits, so `pauseAll()` need not wait it out. A resume during the wait
        // ends it: the poll is at once, and the schedule starts over.
        if try await context.waitBetweenUnits(for: pollSchedule.delay(forAttempt: polls), on: clock) { polls = 0 }
      }
      pollNow = false
      let wasPaused = !context.signals.isRunning
      try await context.pausePoint()  // a paused job stops polling here; the server goes on
      // A status check (`JobManager.checkServerJobs()`) may have moved the checkpoint on while the
      // job was paused: go on from the saved one (back to the top if it found the job succeeded).
      if let saved = context.checkpoint { checkpoint = saved }
      if checkpoint.lastState == .succeeded { continue }
      if wasPaused { polls = 0 }  // resumed: this poll is at once, and the schedule starts over
      let status = try await service.status(ofJob: id, messagesAfter: checkpoint.messagesSeen)
      let fresh = absorb(status, into: &checkpoint, context: context)
      lastError = fresh.last(where: { $0.severity == .error })?.text ?? lastError
      switch status.state {
      case .succeeded:
        continue  // the checkpoint says so now: the result, at the top
      case .failed, .timedOut:
        throw ServerJobError(
          code: .serverJobFailed, message: "server job \(id) \(status.state)" + (lastError.map { ": \($0)" } ?? ""))
      case .cancelled:
        throw ServerJobError(code: .serverJobCancelled, message: "server job \(id) was cancelled on the server")
      case .submitted, .waiting, .executing, .cancelling:
        continue
      }
    }
  }

  /// Posts the new messages of `status` and saves what it changed in the checkpoint, in one step,
  /// then reports its progress.
  private func absorb(
    _ status: ServerJobStatus, into checkpoint: inout ServerJobCheckpoint, context: JobContext<ServerJobCheckpoint>
  ) -> [ServerJobMessage] {
    let (fresh, changed) = checkpoint.absorb(status)
    // One step: the checkpoint that counts the messages is never saved (or stored by a JobManager,
    // which writes at once on a checkpoint) without them, and they never without it.
    if changed {
      let messages = fresh.map { JobMessage($0.text, severity: $0.severity, source: serverMessageSource) }
      context.saveCheckpoint(checkpoint, posting: messages)
    }
    if let progress = status.progress { context.reportProgress(fractionCompleted: progress) }
    return fresh
  }

  /// Asks the server to cancel the job, from a task that is not cancelled, and waits for the
  /// answer. Returns the `CancellationError` to throw.
  nonisolated(nonsending) private func cancelOnServer(
    _ checkpoint: inout ServerJobCheckpoint, in context: JobContext<ServerJobCheckpoint>
  ) async -> CancellationError {
    // The saved checkpoint is the newest: a status check may have moved it on while the job was
    // paused (and a refusal below must not save an older one over it).
    if let saved = context.checkpoint { checkpoint = saved }
    let id = checkpoint.serverJobID
    guard !checkpoint.lastState.isFinished else {
      context.post("Cancelled after server job \(id) had \(checkpoint.lastState)", source: Self.messageSource)
      return CancellationError()
    }
    context.post("Asking the server to cancel job \(id)", source: Self.messageSource)
    let service = self.service
    let answer = await Task { () -> Result<ServerJobStatus, any Error> in
      do { return .success(try await service.cancel(job: id)) } catch { return .failure(error) }
    }.value
    switch answer {
    case .success(let status):
      _ = absorb(status, into: &checkpoint, context: context)
      context.post("The server answered the cancel request: job \(id) \(status.state)", source: Self.messageSource)
    case .failure(let error):
      let refusal =
        error as? ServerJobError
        ?? ServerJobError(
          code: .cancelFailed, message: "the request to cancel server job \(id) failed: \(error)", underlyingError: error)
      checkpoint.cancelError = refusal
      context.saveCheckpoint(checkpoint)
      context.post(
        "The server did not cancel job \(id), which may go on on the server: \(refusal)", severity: .error,
        source: Self.messageSource)
    }
    return CancellationError()
  }
}

