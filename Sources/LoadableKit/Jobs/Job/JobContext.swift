/// What a running ``JobWork`` uses to talk to its ``Job``: the checkpoint to resume from, progress,
/// messages, and the points where it may be paused or cancelled.
///
/// The job makes a context for each run of ``JobWork/run(in:)``. Every method is thread-safe, so
/// work that fans out into child tasks may share the context. It is valid only while that call
/// runs: after the job ended, calls on a context that escaped have no useful effect and
/// ``pausePoint()`` throws `CancellationError`.
///
/// ``reportProgress(completed:total:)`` and ``pausePoint()`` are cheap enough to call for every
/// item: while the job runs, they take no lock and allocate nothing (a report that crosses a
/// 1/1000 step takes the job's lock to tell observers, when there are any).
public struct JobContext<Checkpoint: Codable & Sendable>: Sendable {
  @usableFromInline let host: any JobContextHost<Checkpoint>
  @usableFromInline let signals: JobSignals

  init(host: any JobContextHost<Checkpoint>, signals: JobSignals) {
    self.host = host
    self.signals = signals
  }

  /// The last checkpoint saved with ``saveCheckpoint(_:)``, by this run, an earlier run, or the
  /// run before the job was serialized; `nil` when there is none.
  public var checkpoint: Checkpoint? { host.savedCheckpoint() }

  /// Records `checkpoint` as the state from which a later run resumes.
  ///
  /// The job keeps only the latest checkpoint and writes it into ``Job/toJSON()``. Saving one also
  /// restarts the transient-error window (see ``JobOptions``): the work made progress. Save a
  /// checkpoint right after a unit of work is done and before the next ``pausePoint()``, so a job
  /// paused there and persisted does no unit twice.
  public func saveCheckpoint(_ checkpoint: Checkpoint) {
    host.saveCheckpoint(checkpoint, posting: [])
  }

  /// Posts `messages` and records `checkpoint` in one step, so that no saved form of the job (its
  /// JSON, a ``JobManager``'s record) holds the checkpoint without the messages it counts, or the
  /// messages without the checkpoint that counts them.
  func saveCheckpoint(_ checkpoint: Checkpoint, posting messages: [JobMessage]) {
    host.saveCheckpoint(checkpoint, posting: messages)
  }

  /// Reports that `completed` of `total` units are done.
  ///
  /// The fraction is clamped to 0…1, a `total` of zero or less is ignored, and the job's
  /// ``Job/fractionCompleted`` never goes down (a retry that starts over does not move it back).
  /// Observers hear of it once per 1/1000 step, so calling it for each item is fine.
  @inlinable
  public func reportProgress(completed: Int, total: Int) {
    guard total > 0 else { return }
    if signals.raiseProgress(to: Double(completed) / Double(total)), signals.needsPublishing() { host.publishProgress() }
  }

  /// Reports the fraction of the work that is done, from 0 to 1, as
  /// ``reportProgress(completed:total:)`` does. A NaN counts as 0, so it never raises the progress.
  public func reportProgress(fractionCompleted: Double) {
    if signals.raiseProgress(to: fractionCompleted), signals.needsPublishing() { host.publishProgress() }
  }

  /// Posts a message to the job's ``Job/messages``.
  ///
  /// - Parameters:
  ///   - text: The message text.
  ///   - severity: How important it is; `.info` by default.
  public func post(_ text: String, severity: JobMessage.Severity = .info) {
    host.post(JobMessage(text, severity: severity))
  }

  /// Posts a message with a ``JobMessage/source``, for work that combines several services.
  public func post(_ text: String, severity: JobMessage.Severity = .info, source: String?) {
    host.post(JobMessage(text, severity: severity, source: source))
  }

  /// Waits `delay` on `clock` between units of work, at a point the job can be stored from: a
  /// paused job counts as parked during the wait (see ``Job/waitUntilParked()``), so
  /// ``JobManager/pauseAll()`` does not wait it out. The work must not save a checkpoint between
  /// the wait and its next ``pausePoint()``. A resume (``Job/start()`` after ``Job/pause()``)
  /// during the wait ends it at once.
  ///
  /// - Returns: `true` when a resume ended the wait early.
  /// - Throws: `CancellationError` when the calling task is cancelled.
  nonisolated(nonsending) func waitBetweenUnits(for delay: Duration, on clock: any Clock<Duration>) async throws -> Bool {
    let id = nextUniqueID()
    let host = self.host
    host.beginIdleWait(id)
    defer { host.endIdleWait(id) }
    let woken = try await withThrowingTaskGroup(of: Bool.self) { group in
      group.addTask {
        try await Self.sleep(on: clock, for: delay)
        return false
      }
      group.addTask {
        await host.waitForIdleWake(id)
        return true
      }
      defer { group.cancelAll() }
      return try await group.next() ?? false
    }
    try Task.checkCancellation()
    return woken
  }

  private static func sleep<C: Clock<Duration>>(on clock: C, for delay: Duration) async throws {
    try await clock.sleep(for: delay)
  }

  /// A point between units of work where the job may pause or stop.
  ///
  /// Returns at once while the job runs. While it is paused, waits until ``Job/start()`` resumes
  /// it (the job counts as parked then; see ``Job/waitUntilParked()``). Once the job is being
  /// cancelled, or the calling task is, throws `CancellationError`.
  ///
  /// - Throws: `CancellationError` when the job or the calling task is cancelled.
  @inlinable
  nonisolated(nonsending) public func pausePoint() async throws {
    if signals.isRunning, !Task.isCancelled { return }
    try await host.parkAtPausePoint()
  }
}

/// The job side of a ``JobContext``, for everything beyond the lock-free fast paths; ``Job``
/// implements it.
@usableFromInline
protocol JobContextHost<Checkpoint>: AnyObject, Sendable {
  associatedtype Checkpoint: Codable & Sendable
  func savedCheckpoint() -> Checkpoint?
  /// Posts `messages`, then records `checkpoint`, in one transition.
  func saveCheckpoint(_ checkpoint: Checkpoint, posting messages: [JobMessage])
  /// Tells observers about the progress, which crossed a step.
  func publishProgress()
  func post(_ message: JobMessage)
  /// The slow path of ``JobContext/pausePoint()``: parks while paused, throws once cancelled.
  nonisolated(nonsending) func parkAtPausePoint() async throws
  /// The work begins (ends) a wait between units at a point the job can be stored from.
  func beginIdleWait(_ id: UInt64)
  func endIdleWait(_ id: UInt64)
  /// Returns when a resume ends the idle wait `id`, or the calling task is cancelled.
  nonisolated(nonsending) func waitForIdleWake(_ id: UInt64) async
}
