import Observation
import Synchronization

/// A long-running operation with a status, progress, messages, pause, resume and cancel, that
/// can be saved as JSON and resumed after the app stopped.
///
/// A job runs a ``JobWork`` value, the operation's parameters. It does nothing until ``start()``;
/// then the work runs on a task of its own, reports progress and messages through its
/// ``JobContext``, and ends the job ``JobStatus/succeeded`` with an ``output`` or
/// ``JobStatus/failed`` with an ``error``. A finished job never runs again.
///
/// ```swift
/// let job = Job(DownloadTiles(tiles: tiles))
/// job.start()
/// for await event in job.events {                 // the current state first, then each change
///   if case .progress(let fraction) = event { progressView.progress = fraction }
/// }
/// let count = try await job.output                // waits for the end; never starts the job
/// ```
///
/// ## Pausing and persisting
///
/// ``pause()`` sets ``JobStatus/paused`` at once; the work parks at its next
/// ``JobContext/pausePoint()``. Await ``waitUntilParked()`` before ``toJSON()`` to save the job
/// exactly at a checkpoint. ``fromJSON(_:)`` brings it back paused, and ``start()`` resumes it from
/// that checkpoint. See <doc:Jobs> for the JSON format.
///
/// ## Thread safety
///
/// A job is `Sendable` and needs no actor: its state is a value in a `Mutex`, and everything that
/// runs user code or resumes a caller (the work, handlers, continuations) happens after the lock
/// is released. It conforms to `Observable`: `withObservationTracking` and SwiftUI see changes to
/// ``status``, ``fractionCompleted``, ``messages`` and ``error``.
///
/// A running job keeps itself alive until its work stops. A paused job whose work is parked stays
/// alive too, waiting for ``start()`` or ``cancel()``: cancel a job you no longer need.
public final class Job<Work: JobWork>: @unchecked Sendable {
  typealias Machine = JobStateMachine<Work.Checkpoint, Work.Output>

  /// The work this job runs: its parameters.
  public let work: Work
  /// How the job treats transient errors.
  public let options: JobOptions

  let state: Mutex<Machine>
  /// The progress and the pause-point gate, read and written without the lock.
  let signals: JobSignals
  /// The job's run, as an attempt of the one attempt core: its task, the callers of ``output``
  /// (its waiters) and the delivery of the outcome to them. The job starts, cancels and concludes
  /// it; nobody else does (see `AsyncLoadable+Owned.swift`).
  let run: AsyncLoadable<Work.Output>
  let registrar = ObservationRegistrar()

  /// Creates a job that runs `work` with default ``JobOptions``: no error is transient.
  ///
  /// The job is ``JobStatus/notStarted``; call ``start()`` to run it.
  public convenience init(_ work: Work) {
    self.init(work, options: JobOptions())
  }

  /// Creates a job that runs `work` with `options`.
  ///
  /// - Parameters:
  ///   - work: The work and its parameters.
  ///   - options: Which errors are transient, the backoff and window for retrying them, and the
  ///     clock to wait on.
  public init(_ work: Work, options: JobOptions) {
    self.work = work
    self.options = options
    var machine = Machine(messages: JobMessageLog(limit: options.messageLimit))
    machine.runsWorkToCancel = Self.runsWorkToCancel
    self.state = Mutex(machine)
    self.signals = JobSignals(progress: 0)
    self.run = AsyncLoadable(.notLoaded, content: nil, operation: nil)
  }

  /// A job restored from its JSON form; `outcome`, for one restored after it finished, is what
  /// ``output`` gives (its run's outcome: `output` throws or returns it at once).
  init(restoring work: Work, options: JobOptions, machine: Machine, outcome: Result<Work.Output, any Error>?) {
    self.work = work
    self.options = options
    self.signals = JobSignals(progress: machine.progress)
    switch outcome {
    case .failure(let error)?: self.run = AsyncLoadable(.failed(error), content: nil, operation: nil)
    case .success(let output)?: self.run = AsyncLoadable(.loaded, content: output, operation: nil)
    case nil: self.run = AsyncLoadable(.notLoaded, content: nil, operation: nil)
    }
    var machine = machine
    machine.runsWorkToCancel = Self.runsWorkToCancel
    self.state = Mutex(machine)
  }

  /// Whether cancelling the job while its work is not running runs the work once more, cancelled:
  /// a server job's runner then asks the server to cancel (see ``ServerJobRunner``).
  static var runsWorkToCancel: Bool { Work.Checkpoint.self == ServerJobCheckpoint.self }

  deinit {
    // The entries (handlers) and the deliveries still queued for them are released here, after
    // the lock.
    // Their ends are told outside any attempt, as every delivery is (`carryOut`): a job can be
    // released inside a loadable's `performLoad()`.
    let (observers, pending) = state.withLock(owner: self) { $0.detachObservers() }
    AttemptContext.outside {
      for observer in observers { observer.handler(.end(nil)) }
    }
    _ = consume pending
  }

  // MARK: - State

  /// The current status. Observable.
  public var status: JobStatus {
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.status)
    return state.withLock(owner: self) { $0.status }
  }

  /// The messages posted so far, oldest first, at most ``messageLimit`` of them: past the limit the
  /// oldest are dropped and counted in ``droppedMessageCount``. Observable.
  public var messages: [JobMessage] {
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.messages)
    return state.withLock(owner: self) { $0.messages }
  }

  /// How many messages were dropped to keep ``messages`` within ``messageLimit``, the oldest
  /// first, since the job was created (a restored job goes on counting from its JSON form).
  /// Observable, with ``messages``.
  public var droppedMessageCount: Int {
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.messages)
    return state.withLock(owner: self) { $0.messageLog.droppedCount }
  }

  /// The most messages the job keeps: ``JobOptions/messageLimit`` when it was created, or the
  /// limit saved in its JSON form when it was restored.
  public var messageLimit: Int {
    state.withLock(owner: self) { $0.messageLog.limit }
  }

  /// The fraction of the work completed, from 0 to 1.
  ///
  /// It never goes down, and it is 1 once the job succeeded. Reading it always gives the latest
  /// value; observation (``events``, `withObservationTracking`) is told about it once per 1/1000
  /// step and before every status change.
  public var fractionCompleted: Double {
    signals.noteAudience()  // before the access: progress steps are published from now on
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.fractionCompleted)
    return signals.progress
  }

  /// Why the job failed; non-`nil` exactly when ``status`` is ``JobStatus/failed``. Observable.
  ///
  /// `CancellationError` after ``cancel()``; a ``JobError`` with ``JobError/Code/connectionLost``
  /// when transient errors outlasted the window; otherwise the error the work threw.
  public var error: (any Error)? {
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.error)
    // The run's outcome is read after the job's lock, only when the run holds the error.
    return state.withLock(owner: self) { $0.failure }.error(inRun: run.knownOutcome)
  }

  /// Status, progress, messages and error, read together in one step. Observable.
  public var snapshot: JobSnapshot {
    signals.noteAudience()
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.status)
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.fractionCompleted)
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.messages)
    registrar.access(ObservedJobProperties.shared, keyPath: ObservedJobProperties.error)
    return readSnapshot { _ in }.snapshot
  }

  /// The snapshot, and what `body` reads, in one step of the state; a failed job's error is read
  /// from its run when the run holds it, after the job's lock (the run has its own). A finished
  /// job's state no longer changes, so the two reads agree.
  func readSnapshot<R>(alsoReading body: (borrowing Machine) -> R) -> (snapshot: JobSnapshot, also: R) {
    let (read, failure, also) = withState { state in (state.snapshot(), state.failure, body(state)) }
    var snapshot = read
    snapshot.error = failure.error(inRun: run.knownOutcome)
    return (snapshot, also)
  }

  /// The job's identifier in the ``JobManager`` that holds it (``ManagedJob/id``, the name of its
  /// record in the manager's store); `nil` while no manager holds it.
  public var managedID: String? {
    state.withLock(owner: self) { $0.managedID }
  }

  /// The id of the job on the server, once the server accepted it: the ``ServerJobCheckpoint``'s
  /// ``ServerJobCheckpoint/serverJobID``. `nil` before, and for work whose checkpoint is not a
  /// ``ServerJobCheckpoint``.
  public var serverJobID: String? {
    (state.withLock(owner: self) { $0.checkpoint } as? ServerJobCheckpoint)?.serverJobID
  }

  /// The last checkpoint the work saved (or the one restored from JSON); `nil` when there is none.
  public var checkpoint: Work.Checkpoint? {
    state.withLock(owner: self) { $0.checkpoint }
  }

  // MARK: - Lifecycle

  /// Starts the job, or resumes it when it is paused.
  ///
  /// | status | effect | returns |
  /// |---|---|---|
  /// | ``JobStatus/notStarted`` | runs the work from the start | `true` |
  /// | ``JobStatus/paused`` | the parked work goes on; a job restored from JSON runs its work again from the checkpoint | `true` |
  /// | ``JobStatus/started``, ``JobStatus/canceling`` | nothing | `false` |
  /// | ``JobStatus/succeeded``, ``JobStatus/failed`` | nothing: a finished job never runs again | `false` |
  ///
  /// - Returns: Whether the job started or resumed.
  @discardableResult
  public func start() -> Bool {
    let (started, effects) = withState { $0.start() }
    perform(consume effects)
    return started
  }

  /// Pauses a running job.
  ///
  /// The status becomes ``JobStatus/paused`` at once; the work goes on until its next
  /// ``JobContext/pausePoint()`` and parks there until ``start()`` or ``cancel()``. Await
  /// ``waitUntilParked()`` to know it has stopped. A job waiting to retry a transient error stays
  /// paused after the wait.
  ///
  /// - Returns: `true` when the job was ``JobStatus/started``; `false` in every other status.
  @discardableResult
  public func pause() -> Bool {
    let (paused, effects) = withState { $0.pause() }
    perform(consume effects)
    return paused
  }

  /// Cancels the job and waits until its work has stopped.
  ///
  /// A running or paused job becomes ``JobStatus/canceling``: its task is cancelled, a parked
  /// ``JobContext/pausePoint()`` throws `CancellationError`, and this call waits until
  /// ``JobWork/run(in:)`` returns. The job then ends ``JobStatus/failed`` with `CancellationError`,
  /// even when the work ignored the cancellation and returned a value: that value is dropped.
  /// A job that was not running (``JobStatus/notStarted``, or paused after ``fromJSON(_:)``) fails
  /// at once — except a server job (its checkpoint a ``ServerJobCheckpoint``) that has saved a
  /// checkpoint: its work runs once more, cancelled from the start, so that its runner asks the
  /// server to cancel and records the answer in ``ServerJobCheckpoint/cancelError``; this call
  /// waits for that, as for a running job.
  ///
  /// Cancelling the task that calls this method stops the wait early (the job still ends as
  /// described).
  ///
  /// - Returns: `true` when this call cancelled the job; `false` when it had already finished or
  ///   another call was cancelling it (this call still waits for the work to stop).
  @discardableResult
  nonisolated(nonsending) public func cancel() async -> Bool {
    let (outcome, effects) = withState { $0.cancel() }
    perform(consume effects)
    switch outcome {
    case .nothing:
      return false
    case .cancelled:
      return true
    case .canceling:
      _ = try? await output
      return true
    case .alreadyCanceling:
      _ = try? await output
      return false
    }
  }

  /// Cancels the job as ``cancel()`` does, and says whether it was cancelled everywhere: for a
  /// server job, whether the server cancelled its job too.
  ///
  /// ```swift
  /// switch await job.cancelAndReport() {
  /// case .cancelled: break
  /// case .serverDidNotCancel(let refusal): show("The server goes on with the job: \(refusal.message)")
  /// case .notCancelled: break                       // it had already finished
  /// }
  /// ```
  ///
  /// - Returns: ``JobCancelOutcome/notCancelled`` when the job had already finished;
  ///   ``JobCancelOutcome/serverDidNotCancel(_:)`` when the job ended here but the server refused
  ///   to cancel its job or could not be asked (``ServerJobCheckpoint/cancelError``); otherwise
  ///   ``JobCancelOutcome/cancelled``.
  nonisolated(nonsending) public func cancelAndReport() async -> JobCancelOutcome {
    if status.isFinished { return .notCancelled }
    let cancelled = await cancel()
    guard cancelled || error is CancellationError else { return .notCancelled }
    if let refusal = (checkpoint as? ServerJobCheckpoint)?.cancelError { return .serverDidNotCancel(refusal) }
    return .cancelled
  }

  /// The output of the job, once it has succeeded.
  ///
  /// Waits until the job ends; it never starts the job, so awaiting the output of a job nobody
  /// starts waits until the awaiting task is cancelled. Returns at once when the job's end has
  /// already been delivered to its observers; a caller that comes in between waits for that delivery.
  ///
  /// - Throws: The job's ``error`` when it failed (`CancellationError` after ``cancel()``);
  ///   ``JobError/Code/outputNotPersisted`` for a job restored from JSON after it finished;
  ///   `CancellationError` when the awaiting task is cancelled.
  nonisolated(nonsending) public var output: Work.Output {
    get async throws {
      // The callers wait in the run's attempt: they resume once the job has ended and its
      // observers were told.
      try await run.awaitOutcome()
    }
  }

  /// Waits until a paused job's work has stopped at a pause point, so that its checkpoint cannot
  /// change any more.
  ///
  /// Returns at once unless the job is ``JobStatus/paused`` with its work still running. Otherwise
  /// it returns when the work parks at ``JobContext/pausePoint()``, or when the job is resumed,
  /// cancelled or finishes, or when the calling task is cancelled. A job waiting out a
  /// transient-error backoff counts as parked, and so does a server job waiting for its next poll
  /// (``ServerJobRunner``): its checkpoint cannot change before its next pause point.
  ///
  /// ```swift
  /// job.pause()
  /// await job.waitUntilParked()
  /// try job.toJSON().write(to: url)     // exactly at the last checkpoint
  /// ```
  ///
  /// Work that calls ``JobContext/pausePoint()`` from several child tasks counts as parked when the
  /// first of them parks.
  nonisolated(nonsending) public func waitUntilParked() async {
    let id = nextUniqueID()
    await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      await withUnsafeContinuation { (continuation: Machine.SettleWaiter) in
        let now = withState { $0.addSettleWaiter(id, continuation, taskIsCancelled: Task.isCancelled) }
        if now { continuation.resume() }
      }
    } onCancel: {
      state.withLock(owner: self) { $0.removeSettleWaiter(id) }?.handOff()
    }
  }

  /// The continuations the job holds (parked work and settle waiters, and the callers of
  /// ``output`` waiting in the run's attempt), for tests.
  var waiterCountForTesting: Int { state.withLock(owner: self) { $0.waiterCount } + run.waiterCount }

  /// The waiter slots the run's attempt stores, those of callers that left included, for tests.
  var storedOutputWaiterSlotsForTesting: Int { run.storedWaiterSlotCount }

  // MARK: - Effects

  /// Runs `body` on the state, with the lock-free progress mirrored in and out, and keeps the
  /// pause-point gate in step with the status.
  func withState<R>(_ body: (inout Machine) -> R) -> R {
    state.withLock(owner: self) { state in
      let before = signals.progressBits.load(ordering: .sequentiallyConsistent)
      state.progress = Double(bitPattern: before)
      let result = body(&state)
      if state.progress.bitPattern > before {
        _ = signals.progressBits.max(state.progress.bitPattern, ordering: .relaxed)
      }
      signals.gate.store(state.pausePointsOpen, ordering: .releasing)
      return result
    }
  }

  /// Performs what a transition asked for, after the lock, in the one order of effects
  /// (``EffectsHost/carryOut(_:)``): (1) cancel the run's task; (2) tell observation, the
  /// observers and the installed instruments; (4) resume the waiters — parked callers, settle
  /// waiters, then the callers of ``output``, by concluding the run's attempt (whose effects are
  /// carried out in the same order) — then launch a run; (5) release the values the state let go
  /// of: they go with `effects`, last.
  func perform(_ effects: consuming Machine.Effects) {
    carryOut(consume effects)
  }
}

extension Job: EffectsHost {
  func isEmpty(_ effects: Machine.Effects) -> Bool {
    !effects.cancelRun && effects.changes.isEmpty && !effects.drain && effects.reports.isEmpty
      && effects.resumeParked.isEmpty && effects.cancelParked.isEmpty && effects.settled.isEmpty
      && effects.wakeIdle.isEmpty && effects.result == nil && effects.launch == nil
  }

  func cancelPhase(_ effects: Machine.Effects) {
    if effects.cancelRun { run.cancelOwnedAttemptTask() }
  }

  func notifyPhase(_ effects: Machine.Effects) {
    notifyObservation(of: effects.changes)
    if effects.drain { drainObservers() }
    if !effects.reports.isEmpty { JobProbe.report(effects.reports, job: self, name: Work.kind, own: options.instrument) }
  }

  func resumePhase(_ effects: Machine.Effects) {
    for park in effects.resumeParked { park.handOff() }
    for park in effects.cancelParked { park.handOff(throwing: CancellationError()) }
    for waiter in effects.settled { waiter.handOff() }
    for waiter in effects.wakeIdle { waiter.handOff() }
    if let result = effects.result {
      run.conclude(with: result)
      let kept = withState { $0.runConcluded() }
      _ = kept  // released after the lock
    }
    if let runID = effects.launch { launch(runID) }
  }
}
