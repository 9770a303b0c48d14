import Observation
import Synchronization

/// A resource that loads asynchronously, once, for every caller that shares it.
///
/// An `AsyncLoadable` owns at most one *attempt* at a time. Every caller that asks while an
/// attempt runs joins it; a failure is remembered until a caller explicitly retries; the status is
/// observable. It speaks two dialects:
///
/// - ArcGIS Runtime's ``load()``, ``retryLoad()`` and ``cancelLoad()``;
/// - MMMLoadable's ``sync()``, ``syncIfNeeded()``, ``fetch()`` and ``fetchIfNeeded()``, which also
///   *refresh* a loaded resource while keeping its old ``content`` readable.
///
/// Make one from a closure, or subclass and override ``performLoad()``:
///
/// ```swift
/// let portal = AsyncLoadable { try await service.portalInfo() }
/// try await portal.load()                 // runs the closure once
/// async let a = portal.fetchIfNeeded()    // both share the answer; no second request
/// async let b = portal.fetchIfNeeded()
///
/// final class FeatureTable: AsyncLoadable<TableInfo>, @unchecked Sendable {
///   let url: URL
///   init(url: URL) { self.url = url; super.init() }
///   override func performLoad() async throws -> TableInfo { try await fetchInfo(url) }
/// }
/// ```
///
/// ## Behaviour
///
/// | call | notLoaded | loading | loaded | failed |
/// |---|---|---|---|---|
/// | ``load()`` | start, wait | join, wait | return at once | throw the stored error |
/// | ``retryLoad()`` | start, wait | join, wait | return at once | start, wait |
/// | ``cancelLoad()`` | — | fail the attempt and every waiter with `CancellationError` | — | — |
/// | ``sync()`` | start | — | refresh | start |
/// | ``syncIfNeeded()`` | start | — | refresh if ``needsSync`` | start |
/// | ``fetch()`` | start, wait | join, wait | refresh, wait | start, wait |
/// | ``fetchIfNeeded()`` | start, wait | join, or the content at once if `!needsSync` | the content at once if `!needsSync`, else refresh | start, wait |
///
/// The class is thread-safe without actor isolation: its state is a value held in a `Mutex`, and
/// every side effect (resuming callers, calling handlers, starting and cancelling tasks) happens
/// after the lock is released. No user code — ``performLoad()``, ``needsSync``, handlers — ever
/// runs under the lock.
///
/// The async methods are `nonisolated(nonsending)`: they run on the caller's executor. On a loaded
/// resource ``load()`` and ``fetchIfNeeded()`` answer without a suspension or an executor hop.
open class AsyncLoadable<Content: Sendable>: Loadable, Observable, @unchecked Sendable {
  /// A copy of the status for the lock-free fast path of ``load()``; written under the lock.
  @usableFromInline let statusMirror = Atomic<UInt8>(0)
  /// Set once the state has its out-of-line part (observers, dependencies, listeners, settings):
  /// only then has `deinit` anything to tear down, and only then does it take the lock. Written
  /// by ``withState(_:)``, through which every path that creates that part goes.
  let hasExtras = Atomic<Bool>(false)
  /// Set once an observable property was read, which makes the registrar: until then a change
  /// has nobody to notify, and ``deliver(_:contentChanged:runsStatusHook:)`` takes no lock to
  /// find that out. Written by ``withState(_:)``, through which the observable properties read.
  let hasRegistrar = Atomic<Bool>(false)
  @usableFromInline let state: Mutex<LoadStateMachine>
  @usableFromInline let operation: Operation

  /// What the default ``performLoad()`` runs. An enum rather than one async closure, so that a
  /// synchronous closure, a constant and an error are stored without a conversion thunk.
  ///
  /// Not optional (``overridden`` stands for none): the unspecialized `deinit` then looks up the
  /// generic metadata of one type fewer at run time.
  @usableFromInline enum Operation: Sendable {
    /// None: a subclass overrides ``performLoad()``.
    case overridden
    case async(@Sendable () async throws -> Content)
    case sync(@Sendable () throws -> Content)
    case constant(Content)
    case failure(any Error)
  }

  // MARK: - Creating loadables

  /// Creates a loadable whose content comes from ``performLoad()``, which a subclass overrides.
  ///
  /// - Precondition: the subclass overrides ``performLoad()``. Loading an `AsyncLoadable` made with
  ///   this initializer and no override is a programming error and traps.
  @inlinable
  public init() {
    state = Mutex(LoadStateMachine(.notLoaded, content: Content?.none))
    operation = .overridden
  }

  /// Inlinable, like the public initializers, so that creating a loadable is specialized for the
  /// caller's `Content` instead of looking up the generic metadata of its state at run time.
  @inlinable
  init(_ outcome: LoadStateMachine.Outcome, content: Content?, operation: Operation?) {
    let machine = LoadStateMachine(outcome, content: content)
    let status = machine.status
    state = Mutex(machine)
    statusMirror.store(status.code, ordering: .relaxed)
    self.operation = operation ?? .overridden
  }

  /// Creates a loadable whose attempts run `operation`.
  ///
  /// Nothing runs until somebody loads it. Each attempt calls `operation` once.
  @inlinable
  public convenience init(_ operation: @escaping @Sendable () async throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .async(operation))
  }

  /// Creates a loadable whose attempts run the synchronous `operation`.
  ///
  /// This overload exists so that a closure that does not `await`, such as
  /// `AsyncLoadable { "value" }`, makes a loadable of `String` rather than a loadable *of the
  /// closure*.
  @inlinable @_disfavoredOverload
  public convenience init(_ operation: @escaping @Sendable () throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .sync(operation))
  }

  /// Creates a loadable that is already ``LoadStatus/loaded`` with `content`.
  ///
  /// It is a constant: a refresh succeeds with the same content.
  @inlinable @_disfavoredOverload
  public convenience init(content: Content) {
    self.init(.loaded, content: content, operation: .constant(content))
  }

  /// Creates a loadable that has already ``LoadStatus/failed`` with `error`.
  ///
  /// It is a constant: ``retryLoad()`` runs an attempt that fails with the same error.
  @inlinable
  public convenience init(error: any Error) {
    self.init(.failed(error), content: nil, operation: .failure(error))
  }

  deinit {
    // An idle loadable has nothing to tear down: no lock, and no generic metadata to look up.
    guard hasExtras.load(ordering: .acquiring) else {
      assert(state.withLock(owner: self) { $0.extras == nil }, "extras created outside withState(_:)")
      return
    }
    guard
      let extras = state.withLock(owner: self, { state in
        defer { state.extras = nil }
        return state.extras
      })
    else { return }
    for entry in extras.observers.entries.values { entry.onEnd?() }
    // The dependencies may be the next link of a long chain: the outermost deinit on this thread
    // releases them, and a deinit inside it queues them for that one's loop.
    DeferredRelease.releaseAndDrain(consume extras)
  }

  // MARK: - The subclass hook

  /// Loads the content. Called once per attempt, never concurrently for one instance.
  ///
  /// Override it in a subclass; the default runs the closure given to `init(_:)`. Inside it,
  /// call ``loadDependency(_:)`` to load other loadables with this attempt's intent. The task
  /// running it is cancelled by ``cancelLoad()``, so cooperative work can stop early.
  ///
  /// - Returns: the new content.
  /// - Throws: any error; the loadable then fails with it and keeps its previous content.
  open func performLoad() async throws -> Content {
    switch operation {
    case .overridden:
      preconditionFailure("\(type(of: self)) must override performLoad() or be created with a closure")
    case .async(let operation): return try await operation()
    case .sync(let operation): return try operation()
    case .constant(let content): return content
    case .failure(let error): throw error
    }
  }

  // MARK: - State

  /// The current status. Observable.
  public var loadStatus: LoadStatus {
    let (status, registrar) = withState { ($0.status, $0.observationRegistrar()) }
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadStatus)
    return status
  }

  /// The error of the last attempt; non-`nil` exactly when ``loadStatus`` is ``LoadStatus/failed``.
  /// Observable.
  public var loadError: (any Error)? {
    let (error, registrar) = withState {
      ($0.status == .failed ? $0.error : nil, $0.observationRegistrar())
    }
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadError)
    return error
  }

  /// The content of the last successful attempt. It stays readable during a refresh and after a
  /// failed one. Observable.
  public var content: Content? {
    let (content, registrar) = withState { ($0.content(as: Content.self), $0.observationRegistrar()) }
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.content)
    return content
  }

  /// Status, content and error read together, in one step.
  public var snapshot: LoadSnapshot<Content> {
    let (snapshot, registrar) = withState { ($0.snapshot(as: Content.self), $0.observationRegistrar()) }
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadStatus)
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.content)
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadError)
    return snapshot
  }

  /// How many callers and completion handlers wait for the running attempt (for tests).
  var waiterCount: Int { state.withLock(owner: self) { $0.attempt?.waitingCount ?? 0 } }

  /// Whether there is usable content. The default is `content != nil`; override it to add
  /// conditions (an empty list, an expired token).
  open var isContentAvailable: Bool { content != nil }

  /// Whether ``syncIfNeeded()`` and ``fetchIfNeeded()`` should start an attempt.
  ///
  /// The default is `true` when the content is not available, the status is ``LoadStatus/failed``
  /// or ``LoadStatus/notLoaded``, or the content is stale because a parent's content changed.
  open var needsSync: Bool {
    let available = isContentAvailable
    let status = loadStatus
    return !available || status == .failed || status == .notLoaded || hasStaleSources
  }

  // MARK: - ArcGIS-style loading

  /// Loads the resource, joining an attempt in progress.
  ///
  /// Returns at once when loaded; throws the stored error at once when failed (use
  /// ``retryLoad()`` to try again). Cancelling the calling task makes this call throw
  /// `CancellationError` at once, while the shared attempt goes on for the other callers.
  @inlinable
  nonisolated(nonsending) public final func load() async throws {
    if statusMirror.load(ordering: .acquiring) == LoadStatus.loaded.code { return }
    _ = try await request(.load)
  }

  /// Loads the resource, starting a new attempt when it failed.
  ///
  /// On a loaded resource this returns at once without reloading; use ``fetch()`` to refresh.
  @inlinable
  nonisolated(nonsending) public final func retryLoad() async throws {
    if statusMirror.load(ordering: .acquiring) == LoadStatus.loaded.code { return }
    _ = try await request(.retry)
  }

  /// Cancels the running attempt.
  ///
  /// The loadable fails with `CancellationError`, every caller waiting for it throws
  /// `CancellationError`, and the task running ``performLoad()`` is cancelled. A result that
  /// arrives afterwards is dropped. Required dependencies whose attempts this attempt started and
  /// that nobody else wants are cancelled too, and go back to their state before the attempt.
  /// Does nothing when no attempt is running.
  public final func cancelLoad() {
    let effects = withState { $0.cancel() }
    perform(effects)
  }

  /// Calls `completion` once the resource has loaded or failed, as ``load()`` does.
  ///
  /// When the answer is already known, `completion` runs before this method returns; otherwise it
  /// runs later, on the task that ran the attempt, never under a lock.
  public final func load(completion: @escaping @Sendable ((any Error)?) -> Void) {
    submit(.load, completion: completion)
  }

  /// Calls `completion` once the resource has loaded or failed, as ``retryLoad()`` does.
  public final func retryLoad(completion: @escaping @Sendable ((any Error)?) -> Void) {
    submit(.retry, completion: completion)
  }

  // MARK: - MMMLoadable-style syncing

  /// Starts an attempt unless one is running; on a loaded resource it starts a refresh that keeps
  /// the old content readable. Does not wait.
  public final func sync() {
    submit(.sync, completion: nil)
  }

  /// Like ``sync()``, but a loaded resource refreshes only when ``needsSync`` is `true`.
  public final func syncIfNeeded() {
    submit(.syncIfNeeded, completion: nil)
  }

  /// Loads or refreshes the resource and returns its content.
  ///
  /// Joins a running attempt; otherwise starts one, refreshing loaded content.
  /// - Throws: the attempt's error, `CancellationError`, or ``LoadableError/noContent`` when the
  ///   attempt succeeded but ``isContentAvailable`` is `false`.
  nonisolated(nonsending) public final func fetch() async throws -> Content {
    try checkedContent(try await request(.fetch).content(as: Content.self))
  }

  /// Returns the content at once when ``needsSync`` is `false`; otherwise loads it as
  /// ``fetch()`` does.
  @inlinable
  nonisolated(nonsending) public final func fetchIfNeeded() async throws -> Content {
    // A plain AsyncLoadable cannot have overridden needsSync or isContentAvailable, so their
    // defaults can be evaluated in the same single read as the content.
    if type(of: self) == AsyncLoadable<Content>.self, let content = loadedContent() { return content }
    return try await fetchIfNeededSlowly()
  }

  @usableFromInline
  nonisolated(nonsending) final func fetchIfNeededSlowly() async throws -> Content {
    try checkedContent(try await request(.fetchIfNeeded).content(as: Content.self))
  }

  /// The content when the status is `.loaded` and there is content, in one read.
  ///
  /// Inlinable so that it is specialized for the caller's `Content`: unspecialized, each call
  /// looks up the metadata of the state, `Optional<Content>` and the `Mutex` at run time.
  @inlinable
  final func loadedContent() -> Content? {
    state.withLock(owner: self) { $0.status == .loaded ? $0.content(as: Content.self) : nil }
  }

  func checkedContent(_ content: Content?) throws -> Content {
    guard let content, isContentAvailable else { throw LoadableError.noContent }
    return content
  }

  // MARK: - The request path

  /// Performs `request` and returns the content it ended with (`nil` when there is none).
  @usableFromInline
  nonisolated(nonsending) final func request(_ request: LoadRequest) async throws -> LoadStateMachine.Delivery {
    try await self.request(request, from: AttemptContext.current)
  }

  /// Performs `request` for `context`'s attempt (a dependent waiting for this loadable), or for a
  /// plain caller when `context` is `nil`.
  nonisolated(nonsending) final func request(
    _ request: LoadRequest, from context: AttemptContext?
  ) async throws -> LoadStateMachine.Delivery {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    if let answer = withState({ $0.immediate(request, needsSync: needsSync) }) {
      return try answer.get()
    }
    let waiterID = nextUniqueID()
    guard let context else {
      // A plain caller is one more party waiting: a key under a loader's limit ranks its load by
      // whoever waits (SPEC §5).
      guard callerWillWait(nil) else { return try await wait(for: request, needsSync: needsSync, waiterID: waiterID, from: nil) }
      defer { callerStoppedWaiting(nil) }
      return try await wait(for: request, needsSync: needsSync, waiterID: waiterID, from: nil)
    }
    try context.beginWait(on: self)
    let ranked = callerWillWait(context)
    defer {
      if ranked { callerStoppedWaiting(context) }
      context.endWait(on: self)
    }
    // Demand flows upstream: when the dependent's task is escalated (a claim on a key raised to
    // visible, a higher-priority caller joining), the attempt it waits for is escalated too, and
    // so on up the graph, each waiting attempt passing it on to the one it waits for. (Apple
    // platforms before 26 have no escalation handler: there a dependency keeps the priority it
    // started with.)
    guard #available(macOS 26.0, iOS 26.0, watchOS 26.0, tvOS 26.0, visionOS 26.0, *) else {
      return try await wait(for: request, needsSync: needsSync, waiterID: waiterID, from: context)
    }
    return try await withTaskPriorityEscalationHandler {
      try await wait(for: request, needsSync: needsSync, waiterID: waiterID, from: context)
    } onPriorityEscalated: { _, priority in
      // Called synchronously by the runtime, within the escalated task's status lock: a long chain
      // must not escalate one level inside the other (the trampoline queues what is past 32).
      Trampoline.run { self.escalateRunningAttempt(to: priority) }
    }
  }

  /// A caller — a dependent's attempt (`context`) or a plain caller (`nil`) — is about to wait for
  /// this loadable's attempt. Returns whether ``callerStoppedWaiting(_:)`` must be called when
  /// its wait ends: `false` here; a ``ContentLoader`` key under a load limit ranks its load by
  /// the demand of whoever waits for it (SPEC §5).
  func callerWillWait(_ context: AttemptContext?) -> Bool { false }

  /// The wait a ``callerWillWait(_:)`` that returned `true` announced is over.
  func callerStoppedWaiting(_ context: AttemptContext?) {}

  /// Raises the priority of the running attempt's task (a task's priority is never lowered), or
  /// passes it on through the attempt's driver.
  final func escalateRunningAttempt(to priority: TaskPriority) {
    withState { $0.escalate(to: priority) }.escalate(to: priority)
  }

  /// A caller joined the running attempt: raises its task's priority (or its driver's) to the
  /// caller's, or has the attempt remember it until its task or driver is stored.
  final func escalateJoined(_ runner: AttemptRunner) {
    let priority = Task.currentPriority
    if runner.isNone { return escalateRunningAttempt(to: priority) }
    runner.escalate(to: priority)
  }

  /// Waits for the running attempt, joining it or starting one: the second half of
  /// ``request(_:from:)``.
  nonisolated(nonsending) private final func wait(
    for request: LoadRequest, needsSync: Bool, waiterID: UInt64, from context: AttemptContext?
  ) async throws -> LoadStateMachine.Delivery {
    try await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      return try await withUnsafeThrowingContinuation { (continuation: LoadStateMachine.Continuation) in
        let (decision, event) = withState {
          $0.decide(
            request, needsSync: needsSync, waiter: (waiterID, .task(continuation)),
            byDependent: context != nil, callerCancelled: Task.isCancelled)
        }
        switch decision {
        case .content(let content): continuation.resume(returning: content)
        case .failure(let error): continuation.resume(throwing: error)
        case .joined(let runner): escalateJoined(runner)
        case .none, .started: break
        }
        // Observers hear of `.loading` before the attempt starts, so that a fast attempt cannot
        // resume its callers before the observers are told (this caller holds the delivery role).
        AttemptContext.outside { deliver(event, contentChanged: false) }
        if case .started(let attempt) = decision { launch(attempt, parent: context) }
      }
    } onCancel: {
      withdrawWaiter(waiterID)
    }
  }

  /// A waiter leaves before its answer: it alone is resumed with `CancellationError`, and an
  /// attempt that nobody else wants any more is cancelled and put back as it was (SPEC §2). Does
  /// nothing once the waiter was answered.
  final func withdrawWaiter(_ waiterID: UInt64) {
    let (waiter, effects) = withState { $0.removeWaiter(waiterID) }
    if let effects { perform(effects) }  // observers first, as everywhere
    waiter?.resume(with: .failure(CancellationError()))
  }

  /// The non-async requests: completion handlers and fire-and-forget syncs.
  final func submit(_ request: LoadRequest, completion: LoadStateMachine.Completion?) {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    let waiter = completion.map { (nextUniqueID(), LoadStateMachine.Waiter.completion($0)) }
    let parent = LoadInstrumentation.isActive ? AttemptContext.current : nil  // for the instruments
    let (decision, event) = withState {
      $0.decide(request, needsSync: needsSync, waiter: waiter, byDependent: false, callerCancelled: false)
    }
    AttemptContext.outside {
      deliver(event, contentChanged: false)
      switch decision {
      case .content: completion?(nil)
      case .failure(let error): completion?(error)
      case .joined, .none: break
      // Started last, so that a fast attempt cannot call the completion handler while this call
      // is still delivering the status change.
      case .started(let attempt): launch(attempt, parent: parent)
      }
    }
  }

  /// Starts the task of a new attempt. The task keeps the loadable alive until it ends.
  /// `parent` is the attempt that asked for it, if any (for the instruments); `priority` the
  /// task's priority (`nil`: the caller's).
  final func launch(
    _ attempt: LoadStateMachine.Attempt, parent: AttemptContext? = nil, priority: RawPriority = .none
  ) {
    // Reports the start to the installed instruments; one atomic load when there are none.
    let probe = AttemptProbe.start(self, id: attempt.id, intent: attempt.intent, parent: parent)
    if priority.isNone && launchWithoutTask(attempt, probe: probe) { return }
    let gated = runsOneAttemptAtATime
    let task = TaskLaunch.start(priority: priority.taskPriority) {
      // The gate is almost always free: taken without a continuation then.
      if gated && !self.withState({ $0.tryEnterGate() }) {
        await withUnsafeContinuation { continuation in
          if self.withState({ $0.enterGate(continuation) }) { continuation.resume() }
        }
        ContinuationHandoff.awaited()
      }
      // An attempt cancelled while it waited for the gate does not run at all.
      let result = await self.runAttempt(attempt, probe: probe)
      // Its work returned: no attempt is this task's any more (see `alreadyOutside`).
      AttemptContext.alreadyOutside { self.endAttempt(attempt, with: result, probe: probe, gated: gated) }
    }
    let (cancel, escalate) = withState { $0.attach(.task(task), to: attempt) }
    escalate.ifSome { task.escalatePriority(to: $0) }
    if cancel { task.cancel() }
  }

  /// Starts `attempt` without a task of its own, if this loadable can (a `map` or a `zip`, see
  /// `CombinedLoadable`); `false` when it must run on a task.
  func launchWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> Bool { false }

  /// Whether ``performLoad()`` runs one call at a time, an attempt's task waiting at the gate for
  /// the task of an attempt that was cancelled but whose work has not returned (SPEC §1). `true`;
  /// a `ContentLoader` key's loadable, whose load is a function of its key, says `false` (SPEC
  /// §5: nothing waits behind a stale or abandoned load).
  var runsOneAttemptAtATime: Bool { true }

  /// The end of an attempt started by ``launchWithoutTask(_:probe:)``, which only a subclass that
  /// overrides both has.
  func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?
  ) {
    assertionFailure("\(type(of: self)) started an attempt without a task but cannot end one")
  }

  /// The attempt's work returned `result`: it is committed (unless the attempt was cancelled
  /// meanwhile), the gate goes to the next attempt, the instruments hear of it, and the callers
  /// and observers are told.
  final func endAttempt(
    _ attempt: LoadStateMachine.Attempt, with result: Result<AnyContentBox, any Error>, probe: AttemptProbe?,
    gated: Bool = true
  ) {
    let now = MonotonicInstant.now  // read before the lock: a clock read is some 30 ns
    let (facts, effects, next) = withState { state in
      (
        probe.map { _ in state.instrumentationFacts(for: attempt) }, state.finish(attempt, with: result, now: now),
        gated ? state.leaveGate() : nil
      )
    }
    next?.handOff()
    if let probe, let facts { probe.end(with: result, current: facts.current, callers: facts.callers) }
    perform(effects)
  }

  /// One attempt: declared dependencies, then ``performLoad()``, with this attempt's intent
  /// visible to ``loadDependency(_:)``.
  ///
  /// The content comes back in its ``ContentBox``, as the state machine stores it: no
  /// `Result<Content, …>` whose metadata the unspecialized code would look up at run time.
  nonisolated(nonsending) final func runAttempt(
    _ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?
  ) async -> Result<AnyContentBox, any Error> {
    let context = AttemptContext(owner: self, intent: attempt.intent, attemptID: attempt.id, probe: probe)
    // One read: the context is published (so that a wait closing a cycle through this attempt
    // can find it), and the dependencies and options this attempt runs with are taken.
    let start = state.withLock(owner: self) { state -> (dependencies: [(loadable: any Loadable, kind: DependencyKind)], options: LoadOptions?)? in
      guard state.attempt === attempt else { return nil }
      attempt.context = context
      return (state.extras?.dependencies ?? [], state.extras?.settings?.options)
    }
    guard let start else { return .failure(CancellationError()) }
    defer { context.hasEnded.store(true, ordering: .releasing) }
    return await AttemptContext.run(context) {
      do {
        try await loadDeclaredDependencies(start.dependencies, in: context)
        guard let options = start.options else { return .success(ContentBox(try await performLoad())) }
        return .success(ContentBox(try await options.run { try await self.performLoad() }))
      } catch {
        return .failure(error)
      }
    }
  }

  // MARK: - Effects

  @usableFromInline
  final func withState<R>(_ body: (inout LoadStateMachine) -> R) -> R {
    state.withLock(owner: self) { state in
      let result = body(&state)
      statusMirror.store(state.status.code, ordering: .releasing)
      if state.extras != nil && !hasExtras.load(ordering: .relaxed) { hasExtras.store(true, ordering: .releasing) }
      if state.registrarBox != nil && !hasRegistrar.load(ordering: .relaxed) {
        hasRegistrar.store(true, ordering: .releasing)
      }
      return result
    }
  }

  /// `runsStatusHook`: `false` when the caller already knows of the change (a loader performing
  /// effects it decided for its key, whose state it read under its own lock): then
  /// ``statusDidChange()`` is not called.
  final func perform(_ effects: LoadStateMachine.Effects, runsStatusHook: Bool = true) {
    // Cancelling runs the task's cancellation handlers (or the driver's cancel) here, which may
    // cascade to dependencies, on the trampoline.
    effects.cancel.cancel()
    // Observers and live derived loadables hear of the change before the callers resume, so a
    // caller that returns from `fetch()` finds `map` results and status handlers up to date
    // (unless another thread is delivering this loadable's notifications at that moment).
    // Observers, listeners and completion handlers are user code: they must not run as part of
    // an attempt that happens to be on this task (a `cancelLoad()` from inside `performLoad()`).
    AttemptContext.outside { notifyAndResume(effects, runsStatusHook: runsStatusHook) }
  }

  private final func notifyAndResume(_ effects: LoadStateMachine.Effects, runsStatusHook: Bool) {
    deliver(effects.event, contentChanged: effects.changedContent, runsStatusHook: runsStatusHook)
    if effects.changedContent, case .success = effects.result {
      notifyContentListeners()
    }
    if effects.endedAttempt { attemptDidEnd(committed: effects.attemptCommitted) }
    for case let (_, waiter)? in effects.waiters {
      waiter.resume(with: effects.result)
    }
  }

  /// Tells the derived loadables that listen that the content changed. Deep chains are notified
  /// through a trampoline so a long `map` chain cannot overflow the stack.
  ///
  /// One listener (a `map` over this loadable) is called as it is; several are copied out of the
  /// lock into an array. They leave the lock in their ``ContentListener``s: a bare closure type
  /// returned through the lock's generic result is wrapped in a reabstraction thunk on the way
  /// out and another on the way back, two allocations per notification.
  final func notifyContentListeners() {
    let (one, several) = state.withLock(owner: self) { state -> (ContentListener?, [ContentListener]) in
      guard let extras = state.extras, !extras.contentListeners.isEmpty else { return (nil, []) }
      if let only = extras.contentListeners.only { return (only, []) }
      return (nil, extras.contentListeners.all)
    }
    if let one {
      Trampoline.run(one.call)
    } else if !several.isEmpty {
      Trampoline.run {
        for listener in several { listener.call() }
      }
    }
  }

  final func addContentListener(_ listener: @escaping @Sendable () -> Void) -> UInt64 {
    withState { state in
      let id = nextUniqueID()
      state.more.contentListeners.add(ContentListener(call: listener), id: id)
      return id
    }
  }

  final func removeContentListener(_ id: UInt64) {
    _ = state.withLock(owner: self) { $0.extras?.contentListeners.remove(id) }
  }

  /// Whether content this loadable derived from its sources is out of date; derived loadables
  /// override it (see ``needsSync``).
  var hasStaleSources: Bool { false }

  /// What the dependency tree shows under this loadable besides its dependencies: a paged
  /// loadable's page loads under way or failed. None by default.
  var treeExtras: [(loadable: any Loadable, kind: DependencyKind)] { [] }

  /// Called after an attempt's outcome was stored (or the attempt was cancelled or undone) and
  /// observers were told, before its callers resume. A live view applies the source changes that
  /// arrived while the attempt ran.
  func attemptDidEnd(committed: Bool) {}

  /// Called after observers were told of a status change, outside every lock, by whoever made
  /// the change (so possibly on two threads at once): a keyed loadable tells its loader, which
  /// reads the current state each time.
  func statusDidChange() {}

  /// Notifies observers of a status change, outside the lock; then ``statusDidChange()``, unless
  /// `runsStatusHook` is `false` (see ``perform(_:runsStatusHook:)``).
  final func deliver(_ event: LoadStateMachine.StatusEvent?, contentChanged: Bool, runsStatusHook: Bool = true) {
    guard event != nil || contentChanged else { return }
    // No registrar yet means nobody has read an observable property, so nobody tracks one. (The
    // flag is set under the lock that made the registrar, so a change made under the lock after
    // that finds it set.) Read in its box: an `ObservationRegistrar?` (a resilient type of
    // another module) is copied and destroyed through run-time value witnesses.
    if hasRegistrar.load(ordering: .acquiring), let box = state.withLock(owner: self, { $0.registrarBox }) {
      let registrar = box.registrar
      let subject = ObservedProperties.shared
      if event != nil { registrar.withMutation(of: subject, keyPath: ObservedProperties.loadStatus) {} }
      if contentChanged || event?.status == .loaded {
        registrar.withMutation(of: subject, keyPath: ObservedProperties.content) {}
      }
      if event != nil { registrar.withMutation(of: subject, keyPath: ObservedProperties.loadError) {} }
    }
    if event?.startDelivery == true { drainObservers() }
    if runsStatusHook && event != nil { statusDidChange() }
  }

  final func drainObservers() {
    while let batch = state.withLock(owner: self, { $0.extras?.observers.takeBatch() }) {
      for (id, handler, status) in batch where state.withLock(owner: self, { $0.extras?.observers.entries[id] != nil }) {
        handler(status)
      }
    }
  }
}

// MARK: - Observation

/// The observable properties of every ``AsyncLoadable``, named by key paths that are not generic.
///
/// In the library's unspecialized generic code a key path into the generic class
/// (`\AsyncLoadable<Content>.content`) is instantiated by the runtime on every evaluation — some
/// 20,000 instructions and two allocations — because only key paths without generic arguments are
/// cached. `ObservationRegistrar` tells observations apart by the registrar (one per loadable) and
/// the key path, and does not look at the subject it is handed, so these stored key paths on a
/// stand-in subject observe exactly what `\.content` on `self` would, for the cost of a load.
final class ObservedProperties: Observable, Sendable {
  static let shared = ObservedProperties()
  static let loadStatus = \ObservedProperties.loadStatus
  static let loadError = \ObservedProperties.loadError
  static let content = \ObservedProperties.content

  var loadStatus: Void { () }
  var loadError: Void { () }
  var content: Void { () }
}

extension AsyncLoadable {
  /// How many status changes ``loadStatusUpdates`` keeps for a reader that falls behind: the
  /// newest 32.
  public static var defaultStatusBufferSize: Int { 32 }

  /// An asynchronous sequence of statuses: the current one first, then every change, in order.
  ///
  /// Each access makes a new stream. Its buffer keeps the newest ``defaultStatusBufferSize``
  /// changes: a reader that keeps up sees every change, one that falls behind skips the oldest
  /// (use ``loadStatusUpdates(bufferingPolicy:)`` to choose). The stream ends when the loadable is
  /// deallocated; ending the iteration removes the observer.
  public var loadStatusUpdates: AsyncStream<LoadStatus> {
    loadStatusUpdates(bufferingPolicy: .bufferingNewest(Self.defaultStatusBufferSize))
  }

  /// ``loadStatusUpdates`` with the buffering policy of your choice, as `AsyncStream` offers.
  ///
  /// `.unbounded` keeps every change until it is read: only for a reader that is sure to keep up.
  public func loadStatusUpdates(
    bufferingPolicy: AsyncStream<LoadStatus>.Continuation.BufferingPolicy
  ) -> AsyncStream<LoadStatus> {
    let (stream, continuation) = AsyncStream.makeStream(of: LoadStatus.self, bufferingPolicy: bufferingPolicy)
    let id = addObserver({ continuation.yield($0) }, onEnd: { continuation.finish() })
    continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
    return stream
  }

  /// Calls `handler` with the current status, then with every change, in order, one call at a
  /// time, never under the loadable's lock.
  ///
  /// The handler may call back into the loadable. Observation ends when the returned
  /// ``LoadObservation`` is cancelled or deallocated; a call already under way may still finish.
  public func observeLoadStatus(_ handler: @escaping @Sendable (LoadStatus) -> Void) -> LoadObservation {
    let id = addObserver(handler, onEnd: nil)
    return LoadObservation { [weak self] in self?.removeObserver(id) }
  }

  final func addObserver(_ handler: @escaping ObserverRegistry.Handler, onEnd: (@Sendable () -> Void)?) -> UInt64 {
    let (id, drain) = withState { state in
      let current = state.status
      return state.more.observers.add(.init(handler: handler, onEnd: onEnd), current: current)
    }
    if drain { AttemptContext.outside { drainObservers() } }
    return id
  }

  final func removeObserver(_ id: UInt64) {
    let removed = state.withLock(owner: self) { $0.extras?.observers.entries.removeValue(forKey: id) }
    removed?.onEnd?()
  }
}

/// A token for a status observer registered with ``AsyncLoadable/observeLoadStatus(_:)``.
///
/// The observer ends when you call ``cancel()`` or when the token is deallocated.
public final class LoadObservation: Sendable {
  private let onCancel: Mutex<(@Sendable () -> Void)?>

  init(_ onCancel: @escaping @Sendable () -> Void) {
    self.onCancel = Mutex(onCancel)
  }

  /// Ends the observation. Calling it again does nothing.
  public func cancel() {
    let action = onCancel.withLock(owner: self) { action in
      defer { action = nil }
      return action
    }
    action?()
  }

  deinit { cancel() }
}

extension LoadStatus {
  @usableFromInline var code: UInt8 {
    switch self {
    case .notLoaded: 0
    case .loading: 1
    case .loaded: 2
    case .failed: 3
    }
  }
}
