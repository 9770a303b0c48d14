// The state of a job and its transitions as a value (JobStateMachine), and the observable
// properties a transition changed (JobChanges).

/// The observable properties a transition changed; the job tells its `ObservationRegistrar`.
struct JobChanges: OptionSet, Sendable {
  var rawValue: UInt8
  static let status = JobChanges(rawValue: 1 << 0)
  static let progress = JobChanges(rawValue: 1 << 1)
  static let messages = JobChanges(rawValue: 1 << 2)
  static let error = JobChanges(rawValue: 1 << 3)
}

/// The state of a ``Job`` and its transitions, as a value.
///
/// Held in the job's `Mutex`. Every event is a `mutating` method that changes the state and
/// returns ``Effects``: what the job must do *after* leaving the lock (resume continuations, start
/// or cancel the run, deliver events). Nothing here runs user code, suspends or blocks.
///
/// The run itself — its task, the callers of ``Job/output`` and the delivery of the outcome to
/// them — is an attempt of the one attempt core (`AsyncLoadable+Owned.swift`), held by the job as
/// `run`. This machine keeps what a job adds on top: the public status (with `.canceling` and
/// `.paused`), pause points, checkpoints, progress, messages and the job's observers. The status
/// is not derived from the run: `.paused` and `.canceling` are no state of an attempt, and a job
/// restored after it finished shows the end it was saved with (`.succeeded`, or `.failed` with
/// its error) while its run holds `outputNotPersisted` (see "Design" in the Jobs guide).
///
/// Besides the public status, the machine tracks the job's *activity*: whether a task is driving
/// the work (`running`), waiting out a transient-error backoff (`backingOff`), or absent (`idle`).
/// A paused job is *settled* (nothing in progress that could still save a checkpoint) unless it is
/// `running` with no caller parked at a pause point.
struct JobStateMachine<Checkpoint: Sendable, Output: Sendable> {
  typealias Park = UnsafeContinuation<Void, any Error>
  typealias SettleWaiter = UnsafeContinuation<Void, Never>
  typealias Observer = JobObservers<Output>.Handler
  typealias ObserverEntry = JobObservers<Output>.Entry

  enum Activity: Equatable, Sendable {
    case idle, running, backingOff
  }

  /// What to do after leaving the lock, in the one order every engine of LoadableKit uses:
  /// (1) cancel the run's task (`cancelRun`); (2) tell observation (`changes`) and the observers
  /// (`drain`); (3) resume the waiters: parked callers, settle waiters, and — by concluding the
  /// run's attempt with `result`, through the core's performer — the callers of `output`; then
  /// launch a run; (4) release what the state let go of (`released`), last, when the effects are
  /// destroyed.
  struct Effects: Sendable {
    var cancelRun = false
    var changes: JobChanges = []
    var drain = false
    var resumeParked: [Park] = []
    var cancelParked: [Park] = []
    var settled: [SettleWaiter] = []
    /// Idle waits that a resume ended.
    var wakeIdle: [SettleWaiter] = []
    /// How the job ended: the run's attempt is concluded with it.
    var result: Result<Output, any Error>?
    var launch: UInt64?
    /// User values the state replaced or dropped: destroyed with the effects, after the lock is
    /// released, because their `deinit` is user code that may read the job.
    var released = Released()
    /// What to tell the installed instruments, outside the lock: status changes, messages and
    /// tenths of progress (collected only while some instrument is installed).
    var reports: [JobReport.Event] = []
  }

  /// What a transition let go of.
  struct Released: Sendable {
    var checkpoint: Checkpoint?
  }

  enum CancelOutcome: Equatable, Sendable {
    /// The job had already finished.
    case nothing
    /// The job ended at once: no work was running.
    case cancelled
    /// The job is `.canceling`; wait until the work stops.
    case canceling
    /// Another `cancel()` got there first; wait until the work stops.
    case alreadyCanceling
  }

  enum PauseDecision: Equatable, Sendable {
    case proceed, cancel, parked
  }

  private(set) var status: JobStatus
  private(set) var checkpoint: Checkpoint?
  /// Counts saved checkpoints; the transient-error window restarts when it changes.
  private(set) var checkpointGeneration: UInt64 = 0
  /// Counts resumes from a pause; the transient-error window restarts when it changes.
  private(set) var resumeCount: UInt64 = 0
  private(set) var messageLog: JobMessageLog
  var messages: [JobMessage] { messageLog.messages }
  /// How the job ended, from its end until the run's attempt holds it (``runConcluded()``): the
  /// outcome is stored once, in the run (`Job.run`), which is concluded after the job's observers
  /// were told. In between, this is what an observer added then is given, and the job's error.
  private(set) var concluding: Result<Output, any Error>?
  /// The error a job restored after it failed was saved with. Its run holds
  /// `outputNotPersisted` (what `output` throws), so this is the one failure the state keeps.
  private let restoredError: (any Error)?
  /// The current fraction completed. The job mirrors its lock-free progress in here before each
  /// event and reads it back afterwards (success sets it to 1).
  var progress: Double
  private var publishedProgress: Double
  private(set) var activity: Activity = .idle
  private var runID: UInt64 = 0
  /// Callers held at a pause point (paused, or waiting for a checkpoint to be stored).
  private var parked = WaiterStore<Park>()
  /// The work's waits between units at a point the job can be stored from (a server job's wait
  /// for its next poll): a paused job counts as parked during them, and a resume ends them.
  private var idleWaits = WaiterStore<IdleWait>()

  /// One wait between units: whether a resume ended it, and the continuation of the child task
  /// that waits for that resume.
  struct IdleWait: Sendable, WaiterStoreEntry {
    var woken = false
    var waiter: SettleWaiter?

    var holdsContinuation: Bool { waiter != nil }
  }
  private var settleWaiters = WaiterStore<SettleWaiter>()
  private var observers = JobObservers<Output>()
  /// Whether a store must confirm each checkpoint before the work goes past its next pause point
  /// (a ``JobManager`` holds the job).
  private var durabilityRequired = false
  /// The newest checkpoint generation the store confirmed.
  private var durableGeneration: UInt64 = 0
  /// Whether cancelling the job while its work is not running (restored paused, or waiting out a
  /// transient-error backoff) runs the work once more, cancelled, so it can undo what it started
  /// elsewhere: a server job asks its server to cancel. Set for work whose checkpoint is a
  /// ``ServerJobCheckpoint``, and only once there is a checkpoint.
  var runsWorkToCancel = false
  /// The job's identifier in the ``JobManager`` that holds it.
  private(set) var managedID: String?

  /// A manager takes the job under `id` (or lets it go, with `nil`). Returns `false` when another
  /// manager holds it.
  mutating func claimManagedID(_ id: String?) -> Bool {
    if id != nil, managedID != nil { return false }
    managedID = id
    return true
  }

  /// A new job, or one restored from JSON.
  ///
  /// A restored job's `status` is `.notStarted`, `.paused`, `.succeeded` or `.failed` (a finished
  /// one's outcome is its run's, which the job restores).
  init(
    status: JobStatus = .notStarted, checkpoint: Checkpoint? = nil, messages: JobMessageLog = JobMessageLog(limit: 1_000),
    error: (any Error)? = nil, progress: Double = 0
  ) {
    self.status = status
    self.checkpoint = checkpoint
    self.messageLog = messages
    self.restoredError = status == .failed ? error : nil
    self.progress = progress
    self.publishedProgress = progress
  }

  /// Why the job failed, as far as the state knows (``failure``).
  enum JobFailure {
    case none
    case known(any Error)
    /// The run's attempt holds it: read it there (`Job.run`), outside the job's lock.
    case inRun

    /// The error, with `runOutcome` (read only for ``inRun``) where the run holds it.
    func error(inRun runOutcome: @autoclosure () -> Result<Output, any Error>?) -> (any Error)? {
      switch self {
      case .none: nil
      case .known(let error): error
      case .inRun: runOutcome()?.failure
      }
    }
  }

  /// Why the job failed; the run holds the error of a job that ran, once ``runConcluded()``.
  var failure: JobFailure {
    guard status == .failed else { return .none }
    if let error = restoredError ?? concluding?.failure { return .known(error) }
    return .inRun
  }

  /// The snapshot, with `runOutcome` (the run's, read outside the lock) for a failed job whose
  /// error the run holds (``failure``).
  func snapshot(runOutcome: Result<Output, any Error>? = nil) -> JobSnapshot {
    JobSnapshot(
      status: status, fractionCompleted: progress, messages: messages, error: failure.error(inRun: runOutcome),
      droppedMessageCount: messageLog.droppedCount)
  }

  /// A checkpoint is saved that the store has not confirmed yet: pause points hold the work.
  var awaitingDurability: Bool { durabilityRequired && durableGeneration < checkpointGeneration }

  /// Whether a pause point may return at once: the job runs and its last checkpoint is stored.
  var pausePointsOpen: Bool { status == .started && !awaitingDurability }

  /// The continuations the state holds: parked callers and settle waiters (the callers of
  /// `output` wait in the run's attempt).
  var waiterCount: Int { parked.count + settleWaiters.count }

  /// Paused with work in progress that has not reached a pause point (or an idle wait) yet.
  var isUnsettled: Bool { status == .paused && activity == .running && parked.isEmpty && idleWaits.isEmpty }

  // MARK: - Lifecycle

  mutating func start() -> (Bool, Effects) {
    var effects = Effects()
    switch status {
    case .notStarted:
      setStatus(.started, &effects)
      launch(&effects)
    case .paused:
      setStatus(.started, &effects)
      resumeCount &+= 1
      if activity == .idle {
        launch(&effects)
      } else {
        if !awaitingDurability {
          effects.resumeParked = parked.takeAll().map(\.element)
        }
        wakeIdleWaits(&effects)  // a server job waiting for its next poll polls at once
      }
    case .started, .canceling, .succeeded, .failed:
      return (false, effects)
    }
    settle(&effects)
    return (true, effects)
  }

  mutating func pause() -> (Bool, Effects) {
    var effects = Effects()
    guard status == .started else { return (false, effects) }
    setStatus(.paused, &effects)
    settle(&effects)
    return (true, effects)
  }

  mutating func cancel() -> (CancelOutcome, Effects) {
    var effects = Effects()
    switch status {
    case .notStarted:
      end(with: .failure(CancellationError()), &effects)
      return (.cancelled, effects)
    case .paused where activity == .idle && runsWorkToCancel && checkpoint != nil:
      // The work runs once more, cancelled from the start (its task is cancelled when attached,
      // and its pause points throw), so it can cancel what it started on a server.
      setStatus(.canceling, &effects)
      launch(&effects)
      settle(&effects)
      return (.canceling, effects)
    case .paused where activity == .idle:
      end(with: .failure(CancellationError()), &effects)
      return (.cancelled, effects)
    case .started, .paused:
      setStatus(.canceling, &effects)
      effects.cancelRun = true
      effects.cancelParked = parked.takeAll().map(\.element)
      settle(&effects)
      return (.canceling, effects)
    case .canceling:
      return (.alreadyCanceling, effects)
    case .succeeded, .failed:
      return (.nothing, effects)
    }
  }

  /// The task of run `runID` was attached to the run's attempt. Returns `true` when the task must
  /// be cancelled at once because `cancel()` came before it was attached.
  func launched(runID: UInt64) -> Bool {
    runID == self.runID && activity != .idle && status == .canceling
  }

  /// Run `runID` ended with `result`. A cancelled job fails with `CancellationError` and drops the
  /// result. `message` is posted first unless the job is being cancelled.
  mutating func finish(runID: UInt64, with result: Result<Output, any Error>, message: JobMessage? = nil) -> Effects {
    var effects = Effects()
    guard runID == self.runID, activity != .idle else { return effects }
    if status == .canceling {
      end(with: .failure(CancellationError()), &effects)
    } else {
      if let message { append(message, &effects) }
      end(with: result, &effects)
    }
    return effects
  }

  // MARK: - Pause points and transient retries

  mutating func enterPausePoint(_ id: UInt64, _ park: Park, taskIsCancelled: Bool) -> (PauseDecision, Effects) {
    var effects = Effects()
    guard !taskIsCancelled else { return (.cancel, effects) }
    switch status {
    case .started where awaitingDurability:
      parked.append(park, id: id)
      return (.parked, effects)
    case .started:
      return (.proceed, effects)
    case .paused where activity != .idle:
      parked.append(park, id: id)
      settle(&effects)
      return (.parked, effects)
    case .notStarted, .paused, .canceling, .succeeded, .failed:
      return (.cancel, effects)
    }
  }

  /// The task of a parked caller was cancelled: hands back its continuation unless something
  /// already resumed it.
  mutating func leavePausePoint(_ id: UInt64) -> Park? {
    parked.remove(id)
  }

  /// Run `runID` waits `message`'s backoff before running again. Returns `false` when the job is
  /// being cancelled and must finish instead.
  mutating func beginBackoff(runID: UInt64, message: JobMessage) -> (Bool, Effects) {
    var effects = Effects()
    guard runID == self.runID, activity == .running, status != .canceling else { return (false, effects) }
    activity = .backingOff
    append(message, &effects)
    settle(&effects)
    return (true, effects)
  }

  /// Whether run `runID`, being cancelled, must run the work once more so it can cancel what it
  /// started elsewhere (see ``runsWorkToCancel``).
  func mustRunWorkToCancel(runID: UInt64) -> Bool {
    runID == self.runID && status == .canceling && runsWorkToCancel && checkpoint != nil
  }

  mutating func endBackoff(runID: UInt64) {
    if runID == self.runID, activity == .backingOff { activity = .running }
  }

  // MARK: - Idle waits

  /// The work begins a wait between units at a point the job can be stored from: until it ends,
  /// the job counts as parked (its checkpoint cannot change).
  mutating func beginIdleWait(_ id: UInt64) -> Effects {
    var effects = Effects()
    idleWaits.append(IdleWait(), id: id)
    settle(&effects)
    return effects
  }

  /// The wait ended; hands back the continuation of its resume waiter if something left it there
  /// (the caller resumes it: every continuation is resumed once).
  mutating func endIdleWait(_ id: UInt64) -> SettleWaiter? {
    idleWaits.remove(id)?.waiter
  }

  /// The idle wait `id` waits for a resume. Returns `true` when it must not wait: it was resumed
  /// already, it ended, or the waiting task is cancelled.
  mutating func awaitIdleWake(_ id: UInt64, _ waiter: SettleWaiter, taskIsCancelled: Bool) -> Bool {
    guard !taskIsCancelled else { return true }
    let waits = idleWaits.update(id) { wait in
      if wait.woken { return false }
      wait.waiter = waiter
      return true
    }
    return waits != true
  }

  /// The task waiting for the resume of idle wait `id` was cancelled: hands back its continuation
  /// unless something already resumed it.
  mutating func takeIdleWake(_ id: UInt64) -> SettleWaiter? {
    idleWaits.update(id) { $0.waiter.take() } ?? nil
  }

  /// A resume ends every idle wait in progress.
  private mutating func wakeIdleWaits(_ effects: inout Effects) {
    idleWaits.updateEach { wait in
      wait.woken = true
      if let waiter = wait.waiter.take() { effects.wakeIdle.append(waiter) }
    }
  }

  // MARK: - The context

  /// Posts `messages`, then records `checkpoint`, in one step: a store that writes the job on the
  /// checkpoint finds the messages in the same write. The checkpoint it replaces is released with
  /// the returned effects.
  mutating func saveCheckpoint(_ checkpoint: Checkpoint, posting messages: [JobMessage] = []) -> Effects {
    var effects = Effects()
    guard !status.isFinished else { return effects }
    for message in messages { append(message, &effects) }
    effects.released.checkpoint = self.checkpoint
    self.checkpoint = checkpoint
    checkpointGeneration &+= 1
    if observers.enqueue(.checkpointSaved) { effects.drain = true }
    return effects
  }

  /// The checkpoint of a paused job whose work cannot change it (not running, parked at a pause
  /// point, in an idle wait or a backoff), with its generation; `nil` otherwise.
  func checkableCheckpoint() -> (Checkpoint, UInt64)? {
    guard status == .paused, !isUnsettled, let checkpoint else { return nil }
    return (checkpoint, checkpointGeneration)
  }

  /// Saves `checkpoint` with `messages`, as ``saveCheckpoint(_:posting:)`` does, only if the job is
  /// still paused with settled work and its checkpoint is still generation `generation`.
  mutating func saveCheckpointIfSettled(
    _ checkpoint: Checkpoint, posting messages: [JobMessage], generation: UInt64
  ) -> (Bool, Effects) {
    guard status == .paused, !isUnsettled, checkpointGeneration == generation else { return (false, Effects()) }
    return (true, saveCheckpoint(checkpoint, posting: messages))
  }

  // MARK: - Durability

  /// Makes pause points wait for the store to confirm each checkpoint (the checkpoints saved so far
  /// included, until the first confirmation), or stops doing so.
  mutating func requireDurability(_ required: Bool) -> Effects {
    durabilityRequired = required
    return releaseDurabilityWaiters()
  }

  /// The store holds the checkpoints up to `generation`; work held at a pause point goes on.
  mutating func markDurable(_ generation: UInt64) -> Effects {
    durableGeneration = max(durableGeneration, generation)
    return releaseDurabilityWaiters()
  }

  private mutating func releaseDurabilityWaiters() -> Effects {
    var effects = Effects()
    guard pausePointsOpen, !parked.isEmpty else { return effects }
    effects.resumeParked = parked.takeAll().map(\.element)
    return effects
  }

  mutating func post(_ message: JobMessage) -> Effects {
    var effects = Effects()
    guard !status.isFinished else { return effects }
    append(message, &effects)
    return effects
  }

  /// Publishes ``progress`` if it grew since the last progress event.
  mutating func publishProgress() -> Effects {
    var effects = Effects()
    guard !status.isFinished else { return effects }
    flushProgress(&effects)
    return effects
  }

  // MARK: - Waiters

  /// Registers a caller of `waitUntilParked()`; returns `true` when it must not wait.
  mutating func addSettleWaiter(_ id: UInt64, _ waiter: SettleWaiter, taskIsCancelled: Bool) -> Bool {
    guard isUnsettled, !taskIsCancelled else { return true }
    settleWaiters.append(waiter, id: id)
    return false
  }

  mutating func removeSettleWaiter(_ id: UInt64) -> SettleWaiter? {
    settleWaiters.remove(id)
  }

  // MARK: - Observers

  /// Adds an observer whose first delivery is a snapshot (followed by the end when the job has
  /// finished). Returns whether the caller must drain; `nil`, having added nothing, when the job
  /// has finished and its state keeps no copy of the outcome (``concluding``) and none was given:
  /// the run's attempt holds it then, and the caller reads it there, outside the lock, and calls
  /// again with it (`runOutcome`, and `lastTry`: the observer is added whatever it holds).
  ///
  /// The observer knows the progress from its snapshot: it is told only of later steps (steps
  /// reported while nobody listened were not published, and are not published to it again).
  mutating func addObserver(
    _ id: UInt64, _ handler: @escaping Observer, runOutcome: Result<Output, any Error>? = nil, lastTry: Bool = false
  ) -> Bool? {
    let outcome = concluding ?? runOutcome
    if status.isFinished && outcome == nil && !lastTry { return nil }
    var pending: [JobDelivery<Output>] = [.event(.snapshot(snapshot(runOutcome: outcome)))]
    if status.isFinished { pending.append(.end(outcome)) }
    return observers.add(id, handler, pending: pending, knownProgress: progress)
  }

  /// The run's attempt holds the outcome now: returns the copy kept until then, to be released
  /// after the lock.
  mutating func runConcluded() -> Result<Output, any Error>? {
    defer { concluding = nil }
    return concluding
  }

  /// Removes an observer; its handler and the deliveries still queued for it are released with the
  /// returned value.
  mutating func removeObserver(_ id: UInt64) -> JobObservers<Output>.Removed? {
    observers.remove(id)
  }

  /// Takes the queued deliveries with their observers (see ``JobObservers/takeDeliveries()``).
  mutating func takeDeliveries() -> [(Observer, JobDelivery<Output>)]? {
    observers.takeDeliveries()
  }

  /// Removes every observer, for the job's `deinit`; they and the deliveries still queued are
  /// released with the returned value.
  mutating func detachObservers() -> (entries: [ObserverEntry], pending: DeliveryQueue<JobObservers<Output>.Queued>) {
    observers.detachAll()
  }

  // MARK: - Helpers

  private mutating func launch(_ effects: inout Effects) {
    runID &+= 1
    activity = .running
    effects.launch = runID
  }

  private mutating func end(with result: Result<Output, any Error>, _ effects: inout Effects) {
    activity = .idle
    // The outcome is the run's once its attempt holds it (``runConcluded()``); until then, the
    // state's copy (the job's error is read from it meanwhile).
    concluding = result
    if result.isSuccess {
      progress = 1
      setStatus(.succeeded, &effects)
    } else {
      setStatus(.failed, &effects)
    }
    effects.changes.insert(.error)
    effects.result = result
    effects.cancelParked += parked.takeAll().lazy.map(\.element)
    if observers.enqueue(.end(result)) { effects.drain = true }
    settle(&effects)
  }

  private mutating func setStatus(_ newStatus: JobStatus, _ effects: inout Effects) {
    flushProgress(&effects)
    status = newStatus
    emit(.status(newStatus), &effects)
    effects.changes.insert(.status)
  }

  private mutating func append(_ message: JobMessage, _ effects: inout Effects) {
    messageLog.append(message)
    emit(.message(message), &effects)
    effects.changes.insert(.messages)
  }

  private mutating func flushProgress(_ effects: inout Effects) {
    guard progress > publishedProgress else { return }
    if LoadInstrumentation.isActive, let tenth = JobProbe.tenthCrossed(from: publishedProgress, to: progress) {
      effects.reports.append(.progress(tenth))
    }
    publishedProgress = progress
    emit(.progress(progress), &effects)
    effects.changes.insert(.progress)
  }

  private mutating func emit(_ event: JobEvent, _ effects: inout Effects) {
    if LoadInstrumentation.isActive, let report = JobReport.Event(event) { effects.reports.append(report) }
    if observers.enqueue(.event(event)) { effects.drain = true }
  }

  /// Resumes the settle waiters once the job no longer has unparked work while paused.
  private mutating func settle(_ effects: inout Effects) {
    guard !isUnsettled, !settleWaiters.isEmpty else { return }
    effects.settled += settleWaiters.takeAll().lazy.map(\.element)
  }
}
