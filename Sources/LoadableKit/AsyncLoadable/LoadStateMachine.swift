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

/// The status, content and error of a loadable read in one atomic step.
public struct LoadSnapshot<Content: Sendable>: Sendable {
  /// The status at the moment of the read.
  public var status: LoadStatus
  /// The content at the moment of the read; it survives refreshes and failed refreshes.
  public var content: Content?
  /// The error at the moment of the read; non-`nil` exactly when `status == .failed`.
  public var error: (any Error)?
}

/// The state of one ``AsyncLoadable``: a plain value, mutated only under the loadable's lock.
///
/// Every event is a `mutating` method that changes the state and returns what must be done once
/// the lock is released (resume waiters, start or cancel a task, notify observers). It never runs
/// user code and never suspends.
@usableFromInline
struct LoadStateMachine<Content: Sendable> {
  typealias Continuation = LoadContinuation
  @usableFromInline typealias Delivery = LoadDelivery
  typealias Completion = LoadCompletion
  typealias Waiter = LoadWaiter
  @usableFromInline typealias Attempt = RunningAttempt
  typealias Decision = LoadDecision
  typealias Effects = LoadEffects
  typealias Released = LoadReleased
  typealias StatusEvent = LoadStatusEvent

  @usableFromInline var status: LoadStatus
  @usableFromInline var content: Content?
  @usableFromInline var error: (any Error)?
  /// Counts successful attempts (and live recomputations of derived content).
  @usableFromInline var contentVersion: UInt64 = 0
  @usableFromInline var attempt: Attempt?
  /// An attempt's task holds the gate while it runs, so `performLoad()` never runs twice at once
  /// even when a cancelled attempt's work ignores cancellation. Tasks wait in `extras.gateQueue`.
  @usableFromInline var gateBusy = false
  /// Everything an idle loadable does not need, allocated on first use.
  @usableFromInline var extras: LoadableExtras?
  /// Created when an observable property is first read: until then nobody can be tracking one,
  /// so changes need no notification and an idle loadable carries no registrar.
  @usableFromInline var registrar: ObservationRegistrar?

  /// The registrar, created on first use.
  mutating func observationRegistrar() -> ObservationRegistrar {
    if let registrar { return registrar }
    let registrar = ObservationRegistrar()
    self.registrar = registrar
    return registrar
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

  @inlinable init(status: LoadStatus, content: Content?, error: (any Error)?) {
    self.status = status
    self.content = content
    self.error = error
  }


  /// The error is reported only while failed: during a retry the previous attempt's error is kept
  /// (a cascade-cancelled attempt restores it) but is not the loadable's error.
  var snapshot: LoadSnapshot<Content> {
    LoadSnapshot(status: status, content: content, error: status == .failed ? error : nil)
  }

  var delivery: Delivery { Delivery(content: content, version: contentVersion) }

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
    _ request: LoadRequest, needsSync: Bool, waiter: (id: UInt64, waiter: Waiter)?,
    byDependent: Bool, callerCancelled: Bool
  ) -> (Decision, StatusEvent?) {
    switch status {
    case .loaded:
      switch request {
      case .load, .retry: return (.content(delivery), nil)
      case .fetchIfNeeded where !needsSync: return (.content(delivery), nil)
      case .syncIfNeeded where !needsSync: return (.none, nil)
      default: break
      }
    case .failed:
      if request == .load { return (.failure(error ?? CancellationError()), nil) }
    case .loading:
      guard let attempt else { preconditionFailure("loading without an attempt") }
      switch request {
      case .fetchIfNeeded where !needsSync: return (.content(delivery), nil)
      case .sync, .syncIfNeeded:
        attempt.wanted = true
        return (.none, nil)
      default:
        if callerCancelled { return (.failure(CancellationError()), nil) }
        if let waiter { attempt.add(waiter) }
        return (.joined(attempt.task), nil)
      }
    case .notLoaded:
      break
    }
    // Start a new attempt.
    if request.waits && callerCancelled { return (.failure(CancellationError()), nil) }
    let attempt = Attempt(id: nextUniqueID(), intent: request.intent, byDependent: byDependent, previous: self)
    if let waiter {
      attempt.add(waiter)
      if case .completion = waiter.waiter { attempt.wanted = true }
    }
    self.attempt = attempt
    return (.started(attempt), setStatus(.loading))
  }

  /// Stores the task of a freshly started attempt. Returns `true` when the attempt was cancelled
  /// before its task existed, in which case the caller cancels the task.
  mutating func attach(_ task: Task<Void, Never>, to attempt: Attempt) -> Bool {
    attempt.task = task
    return self.attempt !== attempt && !attempt.finished
  }

  /// Takes the gate, or queues `continuation` for it. Returns `true` when taken at once.
  mutating func enterGate(_ continuation: UnsafeContinuation<Void, Never>) -> Bool {
    if gateBusy {
      more.gateQueue.append(continuation)
      return false
    }
    gateBusy = true
    return true
  }

  /// Hands the gate to the next task in line, if any; that task must be resumed.
  mutating func leaveGate() -> UnsafeContinuation<Void, Never>? {
    guard let extras, !extras.gateQueue.isEmpty else {
      gateBusy = false
      return nil
    }
    return extras.gateQueue.removeFirst()
  }

  /// The answer to a request that needs no waiting and changes nothing, or `nil`.
  func immediate(_ request: LoadRequest, needsSync: Bool) -> Result<Delivery, any Error>? {
    switch (status, request) {
    case (.loaded, .load), (.loaded, .retry): .success(delivery)
    case (.loaded, .fetchIfNeeded), (.loading, .fetchIfNeeded): needsSync ? nil : .success(delivery)
    case (.failed, .load): .failure(error ?? CancellationError())
    default: nil
    }
  }

  // MARK: - Ending an attempt

  /// The attempt `id` returned `result`. A result for an attempt that is no longer current
  /// (it was cancelled) is dropped.
  mutating func finish(_ finished: Attempt, with result: Result<Content, any Error>, now: ContinuousClock.Instant) -> Effects {
    finished.finished = true
    guard let attempt, attempt === finished else { return Effects() }
    self.attempt = nil
    var effects = Effects(waiters: attempt.waiters)
    effects.endedAttempt = true
    effects.released = Released(attempt: attempt, content: content, error: error)
    switch result {
    case .success(let value):
      content = value
      error = nil
      contentVersion &+= 1
      more.lastDuration = attempt.started.duration(to: now)
      effects.result = .success(delivery)
      effects.event = setStatus(.loaded)
      effects.changedContent = true
    case .failure(let failure):
      error = failure
      effects.result = .failure(failure)
      effects.event = setStatus(.failed)
    }
    return effects
  }

  /// `cancelLoad()`: the running attempt fails with `CancellationError`, with every waiter.
  mutating func cancel() -> Effects {
    guard let attempt else { return Effects() }
    self.attempt = nil
    let failure = CancellationError()
    let released = Released(attempt: attempt, content: nil, error: error)
    error = failure
    return Effects(
      waiters: attempt.waiters, result: .failure(failure), event: setStatus(.failed), cancelTask: attempt.task,
      released: released)
  }

  /// A waiting caller's task was cancelled: that waiter alone throws `CancellationError`. When the
  /// attempt was started by a dependent and nobody else is interested any more, the attempt is
  /// cancelled and the loadable goes back to what it was before the attempt (SPEC §2): then
  /// `effects` says what else to do.
  ///
  /// The common case — one caller leaving an attempt others still want — hands back just the
  /// waiter, without building ``Effects``.
  mutating func removeWaiter(_ waiterID: UInt64) -> (waiter: Waiter?, effects: Effects?) {
    guard let attempt, let removed = attempt.remove(waiterID) else { return (nil, nil) }
    guard attempt.startedByDependent && !attempt.wanted && attempt.slots.isEmpty && attempt.interest == 0 else {
      return (removed.waiter, nil)
    }
    return (removed.waiter, cancelAndRestore(attempt))
  }

  /// Cancels the current `attempt`, which nobody but its dependent (or a key's claims) wanted, and
  /// puts the loadable back as it was before it: nobody asked *it* to fail.
  mutating func cancelAndRestore(_ attempt: Attempt) -> Effects {
    self.attempt = nil
    var effects = Effects()
    effects.cancelTask = attempt.task
    effects.released = Released(attempt: attempt, content: content, error: error)
    content = attempt.previousContent.map { $0 as! Content }
    error = attempt.previousError
    effects.event = setStatus(attempt.previousStatus)
    effects.changedContent = true
    return effects
  }

  // MARK: - Status changes

  mutating func setStatus(_ newStatus: LoadStatus) -> StatusEvent? {
    let old = status
    status = newStatus
    guard old != newStatus else { return nil }
    let start = extras?.observers.enqueueChange(newStatus) ?? false
    return StatusEvent(status: newStatus, startDelivery: start)
  }
}

/// The status observers of one loadable and the queue that serializes their notifications.
///
/// Changes are queued under the lock in the order they happen; whoever queues into an idle queue
/// becomes the deliverer and drains it outside the lock, so handlers run one at a time, in order,
/// and a handler that changes the loadable only queues more work for the same loop.
struct ObserverRegistry {
  typealias Handler = @Sendable (LoadStatus) -> Void

  struct Entry {
    var handler: Handler
    var onEnd: (@Sendable () -> Void)?
  }

  enum Recipients {
    case all(below: UInt64)
    case one(UInt64)
  }

  var entries: [UInt64: Entry] = [:]
  var queue: [(status: LoadStatus, to: Recipients)] = []
  var delivering = false
  var nextID: UInt64 = 0

  /// Queues a change for every current observer; returns `true` when the caller must drain.
  mutating func enqueueChange(_ status: LoadStatus) -> Bool {
    guard !entries.isEmpty else { return false }
    queue.append((status, .all(below: nextID &+ 1)))
    return claimDelivery()
  }

  /// Adds an observer and queues the current status for it alone.
  mutating func add(_ entry: Entry, current: LoadStatus) -> (id: UInt64, drain: Bool) {
    nextID &+= 1
    entries[nextID] = entry
    queue.append((current, .one(nextID)))
    return (nextID, claimDelivery())
  }

  private mutating func claimDelivery() -> Bool {
    if delivering { return false }
    delivering = true
    return true
  }

  /// Takes the queued notifications, resolved to handlers, or ends delivery when there are none.
  mutating func takeBatch() -> [(UInt64, Handler, LoadStatus)]? {
    if queue.isEmpty {
      delivering = false
      return nil
    }
    let pending = queue
    queue.removeAll(keepingCapacity: true)
    var batch: [(UInt64, Handler, LoadStatus)] = []
    for (status, recipients) in pending {
      switch recipients {
      case .one(let id):
        if let entry = entries[id] { batch.append((id, entry.handler, status)) }
      case .all(let limit):
        for (id, entry) in entries.sorted(by: { $0.key < $1.key }) where id < limit {
          batch.append((id, entry.handler, status))
        }
      }
    }
    return batch
  }
}

/// The rarely used part of a loadable's state, out of line so that an idle loadable stays small.
/// A class, but only ever touched under the loadable's lock, as part of this state.
///
/// Not nested in the generic `LoadStateMachine`: nothing in it depends on the content type, and
/// unspecialized code would otherwise look up its generic metadata at run time on every use.
@usableFromInline final class LoadableExtras {
  /// How long the last successful attempt took (for the dependency tree dump).
  var lastDuration: Duration?
  var observers = ObserverRegistry()
  /// Rarely set configuration (options, name).
  var settings: LoadableSettings?
  /// Derived loadables that recompute or go stale when the content changes.
  var contentListeners: [UInt64: @Sendable () -> Void] = [:]
  /// Declared with `addDependency(_:kind:)`; combinators record their parents here.
  var dependencies: [(loadable: any Loadable, kind: DependencyKind)] = []
  var gateQueue: [UnsafeContinuation<Void, Never>] = []
}

// MARK: - What the engine moves around, type-erased

/// How a caller waits for an attempt.
@usableFromInline typealias LoadContinuation = UnsafeContinuation<LoadDelivery, any Error>

/// What a waiter receives: the content an attempt ended with and its version.
///
/// The content is type-erased, as is everything the engine moves around (waiters, attempts,
/// effects): unspecialized generic code — the library's, for a content type that another module
/// chose — would otherwise look up the metadata of each nested generic type at run time, several
/// times per request. Only the loadable's stored content is typed.
@usableFromInline
struct LoadDelivery: Sendable {
  @usableFromInline var content: (any Sendable)?
  /// Counts the successful attempts; derived loadables compare it to see stale sources.
  @usableFromInline var version: UInt64
}
typealias LoadCompletion = @Sendable ((any Error)?) -> Void

/// Somebody waiting for the running attempt.
enum LoadWaiter {
  case task(LoadContinuation)
  case completion(LoadCompletion)

  func resume(with result: Result<LoadDelivery, any Error>) {
    switch (self, result) {
    case (.task(let continuation), _): continuation.resume(with: result)
    case (.completion(let handler), .success): handler(nil)
    case (.completion(let handler), .failure(let error)): handler(error)
    }
  }
}

/// One running attempt. A class so the idle state stays small and the attempt can be
/// identified and compared cheaply.
@usableFromInline final class RunningAttempt: @unchecked Sendable {  // mutated only under the loadable's lock
  let id: UInt64
  let intent: LoadIntent
  /// Waiters in registration order (resumed in that order). A waiter whose caller was
  /// cancelled leaves a `nil` behind, so leaving costs O(1) however many others wait.
  var waiters: [(id: UInt64, waiter: LoadWaiter)?] = []
  /// Where each waiter still waiting sits in `waiters`.
  var slots: [UInt64: Int] = [:]

  /// How many waiters ever joined, those that left included (for instruments).
  var joinedCount = 0

  func add(_ waiter: (id: UInt64, waiter: LoadWaiter)) {
    joinedCount += 1
    slots[waiter.id] = waiters.count
    waiters.append(waiter)
  }

  /// Removes a waiter that left. Its slot is freed at once; once most slots are empty the list
  /// is compacted, so a long run of callers that join and leave costs memory for those still
  /// waiting only (amortized O(1) a waiter).
  func remove(_ id: UInt64) -> (id: UInt64, waiter: LoadWaiter)? {
    guard let slot = slots.removeValue(forKey: id) else { return nil }
    let removed = waiters[slot]
    waiters[slot] = nil
    if waiters.count >= 32 && slots.count * 4 < waiters.count { compact() }
    return removed
  }

  /// Drops the empty slots, keeping the order of those still waiting.
  private func compact() {
    var kept: [(id: UInt64, waiter: LoadWaiter)?] = []
    kept.reserveCapacity(slots.count * 2)
    var positions: [UInt64: Int] = [:]
    positions.reserveCapacity(slots.count * 2)
    for case let entry? in waiters {
      positions[entry.id] = kept.count
      kept.append(entry)
    }
    waiters = kept
    slots = positions
  }
  /// How many waiter slots are stored, including those of waiters that left.
  var storedWaiterCount: Int { waiters.count }
  /// The attempt's context, once it runs: its waits are edges of the wait-for graph.
  var context: AttemptContext?
  /// The task running the attempt; `nil` until the starter stores it.
  var task: Task<Void, Never>?
  /// Started by another loadable's attempt (a dependent) and not claimed by anyone else since.
  var startedByDependent: Bool
  /// Somebody who is not a waiter wants it — it was started by a caller rather than a
  /// dependent, or `sync()` asked for it — so a cascading cancel leaves it running. Waiters
  /// (callers, completion handlers, other dependents) protect it only while they wait.
  var wanted: Bool
  /// Interest that is not a waiter: a `ContentLoader` key's claims hold one unit while they
  /// last (see `AsyncLoadable+Interest.swift`). Like a waiter, it keeps a dependent-started
  /// attempt alive.
  var interest = 0
  /// What the loadable looked like before this attempt, restored by a cascading cancel.
  let previousStatus: LoadStatus
  let previousContent: (any Sendable)?
  let previousError: (any Error)?
  let started = ContinuousClock.now
  /// The attempt's task has returned (whether or not its result was used).
  var finished = false

  init<Content>(id: UInt64, intent: LoadIntent, byDependent: Bool, previous: LoadStateMachine<Content>) {
    self.id = id
    self.intent = intent
    self.startedByDependent = byDependent
    self.wanted = !byDependent
    self.previousStatus = previous.status
    self.previousContent = previous.content
    self.previousError = previous.error
  }
}

/// The outcome of a request, decided under the lock.
enum LoadDecision {
  /// Answer now with this content (which may be `nil` for `load()` on a loadable without one).
  case content(LoadDelivery)
  /// Throw now.
  case failure(any Error)
  /// The waiter joined the running attempt, whose task (once started) may need its priority
  /// raised to the caller's.
  case joined(Task<Void, Never>?)
  /// A new attempt was created; the caller must start its task (``AsyncLoadable/launch(_:)``)
  /// after leaving the lock.
  case started(RunningAttempt)
  /// Nothing to do (a fire-and-forget request that found an attempt already running).
  case none
}

/// What to do after an attempt ended, was cancelled, or lost a waiter.
struct LoadEffects {
  var waiters: [(id: UInt64, waiter: LoadWaiter)?] = []
  var result: Result<LoadDelivery, any Error> = .success(LoadDelivery(content: nil, version: 0))
  var event: LoadStatusEvent?
  var cancelTask: Task<Void, Never>?
  var changedContent = false
  /// The current attempt ended (with its result used): a live view re-checks its sources.
  var endedAttempt = false
  /// What the state let go of: destroyed with the effects, after the lock is released, because
  /// a content's or an error's `deinit` is user code (and the attempt holds copies of both).
  var released = LoadReleased()
}

struct LoadReleased {
  var attempt: RunningAttempt?
  var content: (any Sendable)?
  var error: (any Error)?
}

/// A status change to deliver to observers after the lock is released.
struct LoadStatusEvent {
  var status: LoadStatus
  var startDelivery: Bool
}
