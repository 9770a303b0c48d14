import Observation

/// What a caller asks of a loadable. Each request maps to the ``LoadIntent`` its attempt passes on
/// to dependencies.
@usableFromInline
enum LoadRequest: UInt8, Sendable {
  case load, retry, fetch, fetchIfNeeded, sync, syncIfNeeded

  /// The intent an attempt started by this request carries down the dependency graph.
  var intent: LoadIntent {
    switch self {
    case .load: .load
    case .retry: .retry
    case .fetch, .sync: .refresh
    case .fetchIfNeeded, .syncIfNeeded: .ifNeeded
    }
  }

  /// Fire-and-forget requests register no waiter.
  var waits: Bool { self != .sync && self != .syncIfNeeded }

  /// Whether the request consults `needsSync`.
  var asksNeedsSync: Bool { self == .fetchIfNeeded || self == .syncIfNeeded }
}

/// Why an attempt runs; dependencies are loaded with the same intent (SPEC §2).
@usableFromInline
enum LoadIntent: UInt8, Sendable, CustomStringConvertible {
  case load, retry, refresh, ifNeeded

  /// The request a dependency receives from an attempt with this intent.
  var dependencyRequest: LoadRequest {
    switch self {
    case .load: .load
    case .retry: .retry
    case .refresh: .fetch
    case .ifNeeded: .fetchIfNeeded
    }
  }

  @usableFromInline var description: String {
    switch self {
    case .load: "load"
    case .retry: "retry"
    case .refresh: "refresh"
    case .ifNeeded: "ifNeeded"
    }
  }
}

/// A ``ContentBox`` whose content type is not named: how the state machine, deliveries and
/// effects hold a content.
@usableFromInline typealias AnyContentBox = AnyObject & Sendable

/// A loadable's content, boxed: see ``LoadStateMachine/contentBox``. Immutable; a new content is
/// a new box.
@usableFromInline
final class ContentBox<Content: Sendable>: Sendable {
  @usableFromInline let value: Content
  @inlinable init(_ value: Content) { self.value = value }

  /// The content of `box`, which must be a `ContentBox<Content>` (not checked).
  @inlinable static func unbox(_ box: AnyContentBox) -> Content {
    unsafeDowncast(box, to: ContentBox<Content>.self).value
  }
}

/// A loadable's `ObservationRegistrar`, boxed: see ``LoadStateMachine/registrarBox``.
@usableFromInline
final class RegistrarBox: Sendable {
  @usableFromInline let registrar = ObservationRegistrar()

  @usableFromInline init() {}
}

/// The state of one ``AsyncLoadable``: a plain value, mutated only under the loadable's lock.
///
/// Every event is a `mutating` method that changes the state and returns what must be done once
/// the lock is released (resume waiters, start or cancel a task, notify observers): an action
/// that names what the event did — ``LoadDecision`` for a request, ``EndAction`` for a cancel, a
/// claim's end or an owner's conclusion, ``LeaveAction`` for a waiter leaving, and
/// ``SupersedeAction``, ``ForgetAction``, ``WriteAction`` and ``LiveUpdateAction`` — with the
/// ``LoadEffects`` that follow in its payload. One event returns its effects bare: an attempt's
/// result, ``finish(_:with:now:)``, on the path every load takes (see ``EndAction``). It never
/// runs user code and never suspends.
@usableFromInline
struct LoadStateMachine {
  typealias Continuation = LoadContinuation
  @usableFromInline typealias Delivery = LoadDelivery
  typealias Completion = LoadCompletion
  typealias Waiter = LoadWaiter
  @usableFromInline typealias Attempt = RunningAttempt
  typealias Decision = LoadDecision
  typealias Effects = LoadEffects
  typealias Released = LoadReleased
  typealias StatusEvent = LoadStatusEvent

  /// Where the loadable is: idle with the outcome of its last attempt, or running an attempt.
  /// The status, the error and the running attempt are read from it; "loading ⇔ an attempt runs"
  /// and "failed ⇔ an error" are facts of its type, not of checks.
  @usableFromInline var phase: Phase
  /// The content, in a box of its own (a ``ContentBox``), so that the state machine is not
  /// generic at all: the state, and the `Mutex` around it, are concrete types whose metadata is
  /// static, and the library's unspecialized code takes the lock and reads or changes the
  /// status, the attempt and the waiters without asking the runtime for the metadata of
  /// `LoadStateMachine` and `Mutex<…>` (issue 13: a third of a `map` node's lookups,
  /// and two of the three of creating and releasing a loadable). Only code that touches the
  /// content itself names its type (``content(as:)``).
  ///
  /// Beside the phase, not in it: content survives a refresh, a failure and a cancel (SPEC §1).
  @usableFromInline var contentBox: AnyContentBox?
  /// Counts successful attempts (and live recomputations of derived content).
  @usableFromInline var contentVersion: UInt64 = 0
  /// An attempt's task holds the gate while it runs, so `performLoad()` never runs twice at once
  /// even when a cancelled attempt's work ignores cancellation. Tasks wait in `extras.gateQueue`.
  @usableFromInline var gateBusy = false
  /// How long the last successful attempt took, in nanoseconds (for the dependency tree dump;
  /// made a `Duration` only there), or `UInt64.max` before the first: see ``lastDuration``.
  /// Kept here, not in ``extras``: a loadable without extras (a `ContentLoader` key, a plain
  /// loadable nothing composes) made them at its first load for this alone, an allocation of
  /// some 200 bytes a key.
  @usableFromInline var lastDurationNanoseconds = UInt64.max
  /// Everything an idle loadable does not need, allocated on first use.
  @usableFromInline var extras: LoadableExtras?
  /// Created when an observable property is first read: until then nobody can be tracking one,
  /// so changes need no notification and an idle loadable carries no registrar.
  ///
  /// Boxed: `ObservationRegistrar` comes from a library built for evolution, whose layout is not
  /// known at compile time; stored inline it would make the whole state's layout a run-time
  /// question (see ``contentBox``).
  @usableFromInline var registrarBox: RegistrarBox?

  /// How long the last successful attempt took, in nanoseconds; `nil` before the first.
  var lastDuration: UInt64? { lastDurationNanoseconds == .max ? nil : lastDurationNanoseconds }

  /// The registrar, created on first use.
  mutating func observationRegistrar() -> ObservationRegistrar {
    registrarForAccess().registrar
  }

  /// The registrar's box, created on first use: what a read of an observable property takes out
  /// of the lock. The box, not the registrar: a tuple holding an `ObservationRegistrar`, whose
  /// layout is not known at compile time, has its metadata looked up at run time on every read.
  @usableFromInline mutating func registrarForAccess() -> RegistrarBox {
    if let registrarBox { return registrarBox }
    let box = RegistrarBox()
    registrarBox = box
    return box
  }

  /// The out-of-line part, created on first use.
  var more: LoadableExtras {
    mutating get {
      if let extras { return extras }
      let extras = LoadableExtras()
      self.extras = extras
      return extras
    }
  }

  /// The content of the last successful attempt (or live recomputation).
  @inlinable func content<Content: Sendable>(as _: Content.Type) -> Content? {
    contentBox.map(ContentBox<Content>.unbox)
  }

  /// A loadable that is idle with `outcome` and no content. Not generic: a subclass's
  /// initializer in the library's unspecialized code (every combinator's) makes one without
  /// looking up the metadata of `Content?` at run time (twice, some 330 instructions each).
  @inlinable init(_ outcome: Outcome) {
    self.phase = .idle(outcome)
  }

  /// A loadable that is idle with `outcome` and `content`.
  @inlinable init<Content: Sendable>(_ outcome: Outcome, content: Content?) {
    self.phase = .idle(outcome)
    self.contentBox = content.map { ContentBox($0) }
  }

  /// The status: ``LoadStatus/loading`` while an attempt runs, otherwise the last outcome's.
  @inlinable var status: LoadStatus {
    switch phase {
    case .running: .loading
    case .idle(.notLoaded): .notLoaded
    case .idle(.loaded): .loaded
    case .idle(.failed): .failed
    }
  }

  /// The error of the last attempt, while the loadable is failed. During a retry the error
  /// before it is kept by the attempt (a cascade that undoes the attempt restores it), but it is
  /// not the loadable's error.
  @inlinable var error: (any Error)? {
    if case .idle(.failed(let error)) = phase { return error }
    return nil
  }

  /// The running attempt, if any.
  @inlinable var attempt: Attempt? {
    if case .running(let attempt) = phase { return attempt }
    return nil
  }

  /// The error is reported only while failed (see ``error``).
  @inlinable func snapshot<Content: Sendable>(as _: Content.Type) -> LoadSnapshot<Content> {
    LoadSnapshot(status: status, content: content(as: Content.self), error: error)
  }

  var delivery: Delivery { Delivery(contentBox: contentBox, version: contentVersion) }

  // MARK: - Requests

  /// Decides a request by the SPEC §1 table.
  ///
  /// - Parameters:
  ///   - needsSync: the value of `needsSync`, read before the lock (it is user code); only used
  ///     by the if-needed requests.
  ///   - waiter: who waits, for the requests that wait.
  ///   - byDependent: the request comes from another loadable's attempt.
  ///   - callerCancelled: the calling task is already cancelled; it must not wait.
  mutating func decide(
    _ request: LoadRequest, needsSync: Bool, waiter: consuming (id: UInt64, waiter: Waiter)?,
    byDependent: Bool, callerCancelled: Bool
  ) -> (Decision, StatusEvent?) {
    let outcome: Outcome
    switch phase {
    case .idle(.loaded):
      switch request {
      case .load, .retry: return (.content(delivery), nil)
      case .fetchIfNeeded where !needsSync: return (.content(delivery), nil)
      case .syncIfNeeded where !needsSync: return (.none, nil)
      default: outcome = .loaded
      }
    case .idle(.failed(let error)):
      if request == .load { return (.failure(error), nil) }
      outcome = .failed(error)
    case .running(let attempt):
      switch request {
      case .fetchIfNeeded where !needsSync: return (.content(delivery), nil)
      case .sync, .syncIfNeeded:
        attempt.standing = .wanted
        return (.none, nil)
      default:
        if callerCancelled { return (.failure(CancellationError()), nil) }
        if let waiter = waiter.take() { attempt.add(waiter) }
        return (.joined(attempt.runner), nil)
      }
    case .idle(.notLoaded):
      outcome = .notLoaded
    }
    // Start a new attempt.
    if request.waits && callerCancelled { return (.failure(CancellationError()), nil) }
    let attempt = Attempt(
      id: nextUniqueID(), intent: request.intent, byDependent: byDependent, after: outcome, content: contentBox)
    // The waiter is moved into the attempt, not copied (a retain and a release of what it holds).
    if let waiter = waiter.take() {
      if case .completion = waiter.waiter { attempt.standing = .wanted }
      attempt.add(waiter)
    }
    return (.started(attempt), setPhase(.running(attempt)))
  }

  /// Stores what runs a freshly started attempt: its task, or its driver. Returns `cancel` when
  /// the attempt was cancelled before its runner existed, in which case the caller cancels it,
  /// and the priority callers asked for meanwhile, which the caller applies.
  mutating func attach(_ runner: AttemptRunner, to attempt: Attempt) -> (cancel: Bool, escalate: RawPriority) {
    attempt.runner = runner
    return (self.attempt !== attempt && !attempt.finished, attempt.pendingPriority)
  }

  /// A caller joined the running attempt at `priority`: returns its runner to escalate, or, when
  /// none is stored yet, remembers the priority for ``attach(_:to:)`` and returns
  /// ``AttemptRunner/none``.
  mutating func escalate(to priority: TaskPriority) -> AttemptRunner {
    guard let attempt else { return .none }
    if !attempt.runner.isNone { return attempt.runner }
    attempt.pendingPriority = max(attempt.pendingPriority, RawPriority(priority))
    return .none
  }

  /// Takes the gate if it is free. Returns whether it did.
  mutating func tryEnterGate() -> Bool {
    if gateBusy { return false }
    gateBusy = true
    return true
  }

  /// Takes the gate, or queues `continuation` for it under `id`, unless `cancelled` (the task's
  /// attempt ended: it leaves without the gate). Returns whether to resume `continuation` at once,
  /// and with what: `true`, the gate is the caller's; `false`, it is not.
  mutating func enterGate(_ continuation: UnsafeContinuation<Bool, Never>, id: UInt64, cancelled: Bool) -> Bool? {
    if cancelled { return false }
    if gateBusy {
      more.gateQueue.append(continuation, id: id)
      return nil
    }
    gateBusy = true
    return true
  }

  /// The continuation queued for the gate under `id`, taken out of the queue: its task was
  /// cancelled (its attempt ended) before the gate was its. It must be resumed with `false`.
  mutating func withdrawFromGate(_ id: UInt64) -> UnsafeContinuation<Bool, Never>? {
    extras?.gateQueue.remove(id)
  }

  /// Hands the gate to the next task in line, if any; that task must be resumed with `true`.
  mutating func leaveGate() -> UnsafeContinuation<Bool, Never>? {
    guard let extras, !extras.gateQueue.isEmpty else {
      gateBusy = false
      return nil
    }
    return extras.gateQueue.popFirst()?.element
  }

  /// The answer to a request that needs no waiting and changes nothing, or `nil`.
  func immediate(_ request: LoadRequest, needsSync: Bool) -> Result<Delivery, any Error>? {
    switch (phase, request) {
    case (.idle(.loaded), .load), (.idle(.loaded), .retry): .success(delivery)
    case (.idle(.loaded), .fetchIfNeeded), (.running, .fetchIfNeeded): needsSync ? nil : .success(delivery)
    case (.idle(.failed(let error)), .load): .failure(error)
    default: nil
    }
  }

  // MARK: - Ending an attempt

  /// The attempt `id` returned `result`. A result for an attempt that is no longer current
  /// (it was cancelled) is dropped.
  ///
  /// `result` holds the content in its ``ContentBox``.
  mutating func finish(_ finished: Attempt, with result: Result<AnyContentBox, any Error>, now: MonotonicInstant) -> Effects {
    finished.finished = true
    guard case .running(let attempt) = phase, attempt === finished else { return Effects() }
    // What the state lets go of is moved out (not copied and then overwritten, a retain and a
    // release each), to be released with the effects, after the lock, with what the ended attempt
    // held of the loadable before it.
    var released = Released()
    released.takeHeld(by: attempt)
    let delivered: Result<LoadDelivery, any Error>
    let outcome: Outcome
    switch result {
    case .success(let box):
      released.content = contentBox.take()
      contentBox = box
      contentVersion &+= 1
      lastDurationNanoseconds = attempt.started.nanoseconds(to: now)
      delivered = .success(delivery)
      outcome = .loaded
    case .failure(let failure):
      delivered = .failure(failure)
      outcome = .failed(failure)
    }
    let event = setPhase(.idle(outcome))
    let waiters = attempt.takeWaiters()
    released.attempt = consume attempt
    // Built in one expression, as it is returned: built in a variable and then returned, it was
    // copied on the way out (its waiters retained once more, and then released). The waiters are
    // moved out of the ended attempt, which nobody joins or leaves any more.
    return Effects(
      waiters: waiters, result: delivered, event: event,
      changedContent: outcome.isLoaded, endedAttempt: true, released: released)
  }

  /// `cancelLoad()`: the running attempt fails with `CancellationError`, with every waiter.
  mutating func cancel() -> EndAction {
    guard let attempt else { return .none }
    let failure = CancellationError()
    // What the attempt held of the loadable before it is released with it, after the lock.
    var released = Released(attempt: attempt, content: nil, error: nil)
    released.takeHeld(by: attempt)
    var effects = Effects(
      waiters: attempt.takeWaiters(), result: .failure(failure), event: setPhase(.idle(.failed(failure))),
      cancel: attempt.runner, released: released)
    effects.endedAttempt = true
    effects.attemptCommitted = false
    return .ended(effects)
  }

  /// A waiting caller's task was cancelled: that waiter alone throws `CancellationError`. When the
  /// attempt was started by a dependent and nobody else is interested any more, the attempt is
  /// cancelled and the loadable goes back to what it was before the attempt (SPEC §2): then
  /// the action's effects say what else to do.
  ///
  /// The common case — one caller leaving an attempt others still want — hands back just the
  /// waiter, without building ``Effects``.
  mutating func removeWaiter(_ waiterID: UInt64) -> LeaveAction {
    guard let attempt, let removed = attempt.remove(waiterID) else { return .gone }
    guard case .forDependents = attempt.standing, attempt.waitingCount == 0, attempt.interest == 0 else {
      return .left(removed.waiter)
    }
    return .leftLast(removed.waiter, cancelAndRestore(attempt))
  }

  /// Cancels the current `attempt`, which nobody but its dependent (or a key's claims) wanted, and
  /// puts the loadable back as it was before it: nobody asked *it* to fail.
  mutating func cancelAndRestore(_ attempt: Attempt) -> Effects {
    var released = Released(attempt: attempt, content: contentBox, error: nil)
    contentBox = attempt.previousContent
    let event = setPhase(.idle(attempt.previousOutcome))
    released.takeHeld(by: attempt)
    // Built in one expression: assigned field by field after `setPhase`, the value was built
    // twice and copied (a copy and a destroy of the effects, ~550 instructions, a key's end).
    return Effects(
      event: event, cancel: attempt.runner, changedContent: true, endedAttempt: true, attemptCommitted: false,
      released: released)
  }

  // MARK: - Status changes

  /// Moves to `newPhase`; returns the event to deliver when the status changed.
  mutating func setPhase(_ newPhase: Phase) -> StatusEvent? {
    let old = status
    phase = newPhase
    let newStatus = status
    guard old != newStatus else { return nil }
    let start = extras?.observers.enqueueChange(newStatus) ?? false
    return StatusEvent(status: newStatus, startDelivery: start)
  }
}

extension LoadStateMachine {
  /// Where a loadable is in its lifecycle (``LoadStateMachine/phase``).
  @usableFromInline
  enum Phase: Sendable {
    /// No attempt runs; `Outcome` is how the last one ended (or how the loadable was created).
    case idle(Outcome)
    /// An attempt runs: the status is ``LoadStatus/loading``.
    case running(RunningAttempt)
  }

  /// How an idle loadable's last attempt ended: the three settled statuses, the failure with its
  /// error.
  @usableFromInline
  enum Outcome: Sendable {
    case notLoaded
    case loaded
    case failed(any Error)

    var isLoaded: Bool {
      if case .loaded = self { return true }
      return false
    }
  }
}

extension Result where Success: Sendable {
  /// The result with its content in a ``ContentBox``, as the state machine stores it.
  @inlinable func boxed() -> Result<AnyContentBox, Failure> {
    map { ContentBox($0) }
  }
}
