/// How a caller waits for an attempt.
/// Non-throwing, the outcome carried as a value: resumed by throwing, the error came out of the wait
/// boxed in one more `any Error` in an unoptimized build, once for each attempt on a task it passed
/// through, and a dynamic cast of the error of a chain 100,000 deep recursed through as many boxes.
@usableFromInline typealias LoadContinuation = UnsafeContinuation<Result<LoadDelivery, any Error>, Never>

/// What a waiter receives: the content an attempt ended with and its version.
///
/// The content is type-erased, as is everything the engine moves around (waiters, attempts,
/// effects): unspecialized generic code — the library's, for a content type that another module
/// chose — would otherwise look up the metadata of each nested generic type at run time, several
/// times per request. It travels in the loadable's own ``ContentBox``: no existential to build,
/// and no dynamic cast to read it (``content(as:)``).
@usableFromInline
struct LoadDelivery: Sendable {
  /// The ``ContentBox`` of the loadable's content, or `nil`.
  @usableFromInline var contentBox: AnyContentBox?
  /// Counts the successful attempts; derived loadables compare it to see stale sources.
  @usableFromInline var version: UInt64

  /// The content, for the loadable's own `Content` (the box's type; not checked).
  @inlinable func content<Content: Sendable>(as _: Content.Type) -> Content? {
    contentBox.map(ContentBox<Content>.unbox)
  }
}

typealias LoadCompletion = @Sendable ((any Error)?) -> Void

/// Somebody waiting for the running attempt.
enum LoadWaiter: Sendable {
  case task(LoadContinuation)
  case completion(LoadCompletion)
  /// A dependent's attempt waiting without a task of its own: the group it waits with, and the
  /// index of this wait in it (``DependencyGroup/arrive(_:_:)``). Like a completion handler, but
  /// it does not make the attempt wanted; the group itself, not a closure, so that a wait
  /// allocates nothing of its own.
  case dependent(DependencyGroup, index: Int)
  /// The one wait of a dependent's attempt without a task that has one source (a `map`'s): its
  /// context, which keeps the wait (``AttemptContext/sourceArrived(_:)``).
  case source(AttemptContext)

  func resume(with result: Result<LoadDelivery, any Error>) {
    switch (self, result) {
    case (.task(let continuation), _): continuation.handOff(.success(result))
    case (.completion(let handler), _): AttemptContext.runningCallbacks { handler(result.failure) }
    case (.dependent(let group, let index), _): group.arrive(index, result)
    case (.source(let context), _): context.sourceArrived(result)
    }
  }
}

/// A call that registers a completion handler (`load(completion:)`, `retryLoad(completion:)`)
/// whose answer is not known yet: the handler must not run before that call returned (SPEC §1).
///
/// The call itself never resumes it, but code it runs can: the status change it delivers reaches
/// observers on this thread, and an observer that cancels the attempt (or one of its sources,
/// whose failure ends it) ends it there, inside the call. So while the call runs, its own handler,
/// resumed on its thread, is held back, and run on a task once the call has returned. Other
/// handlers run as they would (those of calls that returned already); so do handlers resumed on
/// other threads (an attempt that ends on its own task), and an answer known at once, which the
/// call gives before it returns.
enum CompletionCall {
  /// Runs `body`, the work of the call that registered the completion waiter `id`, holding that
  /// handler back if the work resumes it on this thread.
  static func run(registering id: UInt64, _ body: () -> Void) {
    let thread = PerThread.current
    thread.pointee.completionCalls.append((id, nil))
    body()
    guard let held = thread.pointee.completionCalls.removeLast().held else { return }
    TaskLaunch.start { held() }
  }

  /// Holds `handler`, resumed with `error`, back when it is the completion waiter `id` of a call
  /// still running on `thread` (see ``run(registering:_:)``); returns whether it did.
  static func holdBack(
    _ handler: @escaping LoadCompletion, id: UInt64, _ error: (any Error)?, on thread: UnsafeMutablePointer<PerThread>
  ) -> Bool {
    guard let index = thread.pointee.completionCalls.lastIndex(where: { $0.id == id }) else { return false }
    thread.pointee.completionCalls[index].held = { handler(error) }
    return true
  }
}

extension WaiterStore where Element == LoadWaiter {
  /// Resumes every waiter with `result`, in registration order, where the attempt did not end on
  /// a task of its own — a writer's call, a `cancelLoad()`, an observer — or a call that registered
  /// a completion handler runs on this thread:
  /// - that call's own handler is held back until it returned (``CompletionCall``);
  /// - a waiter whose attempt without a task cannot end here (a `map` whose transform must not run
  ///   inside this call: ``AttemptContext/goOnOnATask(for:_:)``) goes on on a task of its own, and the
  ///   waiters after it are resumed there, after it: they find it ended, as they would have had
  ///   it ended here (the ThreadSafety guide: a caller that returns finds `map` results current).
  func resumeInOrder(with result: Result<LoadDelivery, any Error>, on thread: UnsafeMutablePointer<PerThread>) {
    var entries = makeIterator()
    while let (id, waiter) = entries.next() {
      if case .completion(let handler) = waiter,
        CompletionCall.holdBack(handler, id: id, result.failure, on: thread)
      {
        continue
      }
      let outer = thread.pointee.goingOn
      thread.pointee.goingOn = []
      waiter.resume(with: result)
      let goingOn = thread.pointee.goingOn ?? []
      thread.pointee.goingOn = outer
      guard !goingOn.isEmpty else { continue }
      var rest: [LoadWaiter] = []
      while let (_, next) = entries.next() { rest.append(next) }
      // At the steps' demand, or this call's priority if higher (the waiters after them wait too).
      let priority = goingOn.reduce(RawPriority(Task.currentPriority)) { Swift.max($0, $1.context.demand) }
      let task = AttemptContext.endOnATask(priority: priority) { [rest] in
        for (context, step) in goingOn { context.runWentOnStep(step) }
        for waiter in rest { waiter.resume(with: result) }
      }
      for (context, _) in goingOn { context.wentOn(to: task, at: priority) }
      return
    }
  }
}

extension Result {
  /// The error of a failure, or `nil`.
  var failure: Failure? {
    if case .failure(let error) = self { error } else { nil }
  }

  /// Whether it is a success, without a copy of its payload.
  var isSuccess: Bool {
    if case .success = self { true } else { false }
  }
}

/// The waiters of an attempt, in registration order (``WaiterStore``): the first one inline, since
/// most attempts have one waiter (the caller that started it, or a dependent's group).
typealias WaiterList = WaiterStore<LoadWaiter>

extension WaiterStore where Element == LoadWaiter {
  /// The context of the attempt that is the one waiter, when that attempt waits for this
  /// loadable as one of its sources: a `map`'s attempt (``LoadWaiter/source(_:)``) or a `zip`'s,
  /// or an attempt's wait for its declared dependencies (``LoadWaiter/dependent(_:index:)``).
  var soleDependentWaiter: AttemptContext? {
    guard count == 1 else { return nil }
    var context: AttemptContext?
    forEachEntry { waiter in
      switch waiter {
      case .source(let waiting): context = waiting
      case .dependent(let group, _): context = group.context
      case .task, .completion: break
      }
    }
    return context
  }
}

extension LoadWaiter: WaiterStoreEntry {
  /// A caller's task waits on a continuation; a completion handler or a dependent's group does
  /// not (a state machine tested as a value may be dropped with them).
  var holdsContinuation: Bool {
    if case .task = self { true } else { false }
  }
}

/// What runs an attempt: nothing yet (between its creation and its start), its task, or — for an
/// attempt without a task — its ``AttemptDriver``. Cancelling the attempt cancels it; a caller's
/// raised priority goes to it.
enum AttemptRunner {
  case none
  case task(Task<Void, Never>)
  case driver(any AttemptDriver)

  /// Cancels the task or the driver. Runs cancellation handlers, which may cascade to
  /// dependencies: called outside every lock, on the ``Trampoline``.
  func cancel() {
    switch self {
    case .none: break
    case .task(let task): Trampoline.run { task.cancel() }
    case .driver(let driver): Trampoline.run { driver.cancel() }
    }
  }

  func escalate(to priority: TaskPriority) {
    switch self {
    case .none: break
    case .task(let task): task.escalatePriority(to: priority)
    case .driver(let driver): driver.escalate(to: priority)
    }
  }

  var isNone: Bool {
    if case .none = self { return true }
    return false
  }
}

/// Who wants an attempt besides its waiters, which decides whether a cascading cancel may undo
/// it (SPEC §2).
enum AttemptStanding {
  /// Somebody who is not a waiter wants it: it was started by a caller rather than a dependent,
  /// or a completion handler or `sync()` asked for it. A cascading cancel leaves it running.
  case wanted
  /// Started by another loadable's attempt (a dependent) or a key's claims, and not wanted by
  /// anyone else since: when its last waiter leaves and its interest ends, it is undone.
  case forDependents
}

/// What runs an attempt that has no task of its own: a `map` or a `zip` whose attempt is its
/// sources' attempts and a callback (a ``DependencyGroup``, or for one source the attempt's
/// ``AttemptContext``, which keeps its one wait). Cancelling the attempt cancels it, and
/// a caller's raised priority goes through it to the attempts it waits for.
protocol AttemptDriver: AnyObject, Sendable {
  func cancel()
  func escalate(to priority: TaskPriority)
}

/// One running attempt. A class so the idle state stays small and the attempt can be
/// identified and compared cheaply.
///
/// Touched only under the loadable's lock, which already keeps accesses from overlapping: its
/// properties opt out of the dynamic exclusivity checks a class's stored properties otherwise
/// pay on every access (ten a `map` node's load).
@usableFromInline final class RunningAttempt: @unchecked Sendable {
  @usableFromInline let id: UInt64
  /// Waiters in registration order (resumed in that order). A waiter whose caller was
  /// cancelled leaves at once, in O(1) however many others wait (``WaiterStore``).
  @exclusivity(unchecked) var waiters = WaiterList()
  /// How many waiters are still waiting.
  var waitingCount: Int { waiters.count }

  /// How many waiters ever joined, those that left included (for instruments).
  @exclusivity(unchecked) var joinedCount = 0

  func add(_ waiter: consuming (id: UInt64, waiter: LoadWaiter)) {
    joinedCount += 1
    waiters.append(waiter.waiter, id: waiter.id)
  }

  /// Removes a waiter that left; `nil` when it is not waiting (any more).
  func remove(_ id: UInt64) -> (id: UInt64, waiter: LoadWaiter)? {
    waiters.remove(id).map { (id, $0) }
  }

  /// Moves the waiters out of an attempt that ended (``LoadStateMachine/finish(_:with:now:)``):
  /// nobody joins or leaves it any more.
  func takeWaiters() -> WaiterList { waiters.takeAll() }

  /// How many waiter slots are stored, including those of waiters that left.
  var storedWaiterCount: Int { waiters.storedCount }
  /// The attempt's context, once it runs: its waits are edges of the wait-for graph.
  @exclusivity(unchecked) var context: AttemptContext?
  /// The task or the driver running the attempt; ``AttemptRunner/none`` until the starter
  /// stores it.
  @exclusivity(unchecked) var runner = AttemptRunner.none
  /// The highest priority a caller asked for before the task was stored (the task may already
  /// run by then): applied when it is.
  @exclusivity(unchecked) var pendingPriority = RawPriority.none
  /// Whether somebody who is not a waiter wants it (a cascading cancel leaves it running), or
  /// only dependents and claims do. Waiters (callers, other dependents) protect it only while
  /// they wait.
  @exclusivity(unchecked) var standing: AttemptStanding
  // The one-byte fields together (`runner` above them, `interest` below): in declaration order
  // they took 13 bytes of padding, and the attempt 16 bytes more of the allocator's.
  let intent: LoadIntent
  /// Whether it took the place of a running attempt (a supersede): then its
  /// ``previousOutcome`` is not how that attempt ended (see ``EndBefore``).
  let tookARunningOnesPlace: Bool
  /// The attempt's task has returned (whether or not its result was used).
  @exclusivity(unchecked) @usableFromInline var finished = false
  /// Interest that is not a waiter: a `ContentLoader` key's claims hold one unit while they
  /// last (see `AsyncLoadable+Interest.swift`). Like a waiter, it keeps a dependent-started
  /// attempt alive.
  @exclusivity(unchecked) var interest = 0
  /// How the loadable's last attempt had ended before this one, restored by a cascading cancel
  /// (the error of a failure before a retry lives here while the retry runs).
  @exclusivity(unchecked) private(set) var previousOutcome: LoadStateMachine.Outcome
  /// The ``ContentBox`` of the content before it.
  @exclusivity(unchecked) private(set) var previousContent: AnyContentBox?

  /// Moves out what the loadable looked like before this attempt, which an attempt that ended
  /// needs no more: the state releases it with the effects of the end, after the lock, where
  /// user code may run (a content's or an error's `deinit`). Kept here, it went wherever the
  /// attempt's last reference did — a waiter's, a task's —, perhaps where an attempt's end
  /// runs transforms inline (``AttemptContext/isEndingOnAttemptTask``).
  func takePrevious() -> LoadReleased.Previous {
    let outcome = previousOutcome
    previousOutcome = .notLoaded
    if case .failed(let error) = outcome { return (previousContent.take(), error) }
    return (previousContent.take(), nil)
  }
  /// When it started, for its duration (``LoadStateMachine/lastDuration``).
  let started = MonotonicInstant.now

  /// A fresh attempt that takes `old`'s place (``LoadStateMachine/supersede(intent:)``): it
  /// takes `old`'s waiters and interest, as they are, and what the loadable looked like before
  /// `old` (restored if a cascading cancel undoes the fresh attempt). `old` keeps neither.
  /// `forgetting`: the content is being dropped (a `ContentLoader` key removed), so what a
  /// cascading cancel restores is the empty state, not `old`'s previous one.
  init(id: UInt64, intent: LoadIntent, superseding old: RunningAttempt, forgetting: Bool = false) {
    self.id = id
    self.intent = intent
    self.tookARunningOnesPlace = true
    self.standing = old.standing
    self.previousOutcome = forgetting ? .notLoaded : old.previousOutcome
    self.previousContent = forgetting ? nil : old.previousContent
    interest = old.interest
    pendingPriority = old.pendingPriority
    waiters = old.waiters
    joinedCount = old.joinedCount
    old.waiters = WaiterList()
    old.interest = 0
  }

  /// A fresh attempt of an idle loadable whose last attempt ended with `outcome` and whose content
  /// is `content`.
  init(id: UInt64, intent: LoadIntent, byDependent: Bool, after outcome: LoadStateMachine.Outcome, content: AnyContentBox?) {
    self.id = id
    self.intent = intent
    self.tookARunningOnesPlace = false
    self.standing = byDependent ? .forDependents : .wanted
    self.previousOutcome = outcome
    self.previousContent = content
  }
}
