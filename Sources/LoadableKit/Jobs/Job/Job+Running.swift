// Running a job's work: the run's task, the loop that retries transient errors in a
// TransientWindow, and the job as its contexts' host (checkpoints, progress, messages).

// MARK: - Running the work

extension Job {
  /// The ``JobMessage/source`` of the messages the job itself posts (a retry after a transient
  /// error, the connection lost), as opposed to the messages its work posts.
  public static var messageSource: String { "LoadableKit" }

  /// Starts the task of run `runID`: the task of the run's attempt (`run`), which keeps the job
  /// alive until the work stops.
  func launch(_ runID: UInt64) {
    // Every way out of `drive` ends the job (`finish`), which concludes the run's attempt.
    let task = run.launchOwnedAttempt { await self.drive(runID: runID, clock: self.options.clock) }
    if withState({ $0.launched(runID: runID) }) { task.cancel() }
  }

  /// Runs the work until it succeeds, fails, or is cancelled, retrying transient errors.
  func drive<C: Clock<Duration>>(runID: UInt64, clock: C) async {
    var window = TransientWindow<C.Instant>()
    while true {
      let context = JobContext(host: self, signals: signals)
      if withState({ $0.mustRunWorkToCancel(runID: runID) }) {
        // Cancelled while not running (restored paused, or in a backoff): the work runs once
        // more, cancelled, so that a server job asks its server to cancel. The job fails with
        // `CancellationError` whatever the work returns.
        _ = try? await work.run(in: context)
        finish(runID, with: .failure(CancellationError()))
        return
      }
      do {
        try await context.pausePoint()  // a job paused before (or between) runs parks here
        let output = try await work.run(in: context)
        finish(runID, with: .success(output))
        return
      } catch {
        guard !(error is CancellationError), options.isTransient(error) else {
          finish(runID, with: .failure(error))
          return
        }
        let (generation, resumes) = state.withLock(owner: self) { ($0.checkpointGeneration, $0.resumeCount) }
        let decision = window.record(
          errorAt: clock.now, checkpointGeneration: generation, resumes: resumes,
          window: options.transientWindow, backoff: options.backoff)
        switch decision {
        case .giveUp:
          let text = "The connection was lost: the work kept failing for \(options.transientWindow). Last error: \(error)"
          finish(
            runID, with: .failure(JobError(code: .connectionLost, message: text, underlyingError: error)),
            message: JobMessage(text, severity: .error, source: Self.messageSource))
          return
        case .retry(let delay, let attempt):
          let message = JobMessage(
            "Retry \(attempt) in \(delay) after a transient error: \(error)",
            severity: .warning, source: Self.messageSource)
          let (waits, effects) = withState { $0.beginBackoff(runID: runID, message: message) }
          perform(consume effects)
          guard waits else {
            finish(runID, with: .failure(CancellationError()))
            return
          }
          do {
            try await clock.sleep(for: delay)
          } catch {
            withState { $0.endBackoff(runID: runID) }
            if withState({ $0.mustRunWorkToCancel(runID: runID) }) { continue }  // asks the server
            finish(runID, with: .failure(error))
            return
          }
          withState { $0.endBackoff(runID: runID) }
        }
      }
    }
  }

  func finish(_ runID: UInt64, with result: Result<Work.Output, any Error>, message: JobMessage? = nil) {
    perform(withState { $0.finish(runID: runID, with: result, message: message) })
  }
}

// MARK: - The context's host

extension Job: JobContextHost {
  @usableFromInline typealias Checkpoint = Work.Checkpoint

  @usableFromInline
  func savedCheckpoint() -> Work.Checkpoint? {
    state.withLock(owner: self) { $0.checkpoint }
  }

  @usableFromInline
  func saveCheckpoint(_ checkpoint: Work.Checkpoint, posting messages: [JobMessage]) {
    perform(withState { $0.saveCheckpoint(checkpoint, posting: messages) })
  }

  @usableFromInline
  func publishProgress() {
    perform(withState { $0.publishProgress() })
  }

  @usableFromInline
  func post(_ message: JobMessage) {
    perform(withState { $0.post(message) })
  }

  @usableFromInline
  func beginIdleWait(_ id: UInt64) {
    perform(withState { $0.beginIdleWait(id) })
  }

  @usableFromInline
  func endIdleWait(_ id: UInt64) {
    state.withLock(owner: self) { $0.endIdleWait(id) }?.handOff()
  }

  @usableFromInline
  nonisolated(nonsending) func waitForIdleWake(_ id: UInt64) async {
    await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      await withUnsafeContinuation { (continuation: Machine.SettleWaiter) in
        let now = state.withLock(owner: self) {
          $0.awaitIdleWake(id, continuation, taskIsCancelled: Task.isCancelled)
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      state.withLock(owner: self) { $0.takeIdleWake(id) }?.handOff()
    }
  }

  @usableFromInline
  nonisolated(nonsending) func parkAtPausePoint() async throws {
    let id = nextUniqueID()
    try await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      try await withUnsafeThrowingContinuation { (continuation: Machine.Park) in
        let (decision, effects) = withState {
          $0.enterPausePoint(id, continuation, taskIsCancelled: Task.isCancelled)
        }
        perform(consume effects)
        switch decision {
        case .proceed: continuation.resume()
        case .cancel: continuation.resume(throwing: CancellationError())
        case .parked: break
        }
      }
    } onCancel: {
      state.withLock(owner: self) { $0.leavePausePoint(id) }?.handOff(throwing: CancellationError())
    }
  }
}
