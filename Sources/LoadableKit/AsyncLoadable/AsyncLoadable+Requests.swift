import Observation
import Synchronization

// The request path of a loadable: a request decided by the machine under the lock, a caller
// waiting for or joining the running attempt, an attempt launched on a task (or without one) and
// ended. What the decisions return is carried out after the lock, in the one order of effects
// (Engine/EffectOrder.swift; the loadable's phases are in Engine/AsyncLoadable+Perform.swift).
extension AsyncLoadable {
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
      // (No escalation handler, as a dependent's wait has: a raise of a waiting caller's own task
      // stays with it. The handler cost some 1,600 instructions a waiting caller, +14 %.)
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
      Trampoline.run {
        self.escalateRunningAttempt(to: priority)
        // A key ranks its load by its dependents' demand: a dependent that is no key passes its
        // raise on to that rank too (a key's own rank reaches its upstreams through the loader).
        if !(context.owner is any DemandRanked), let key = self as? any DemandRanked {
          key.dependentRaised(context, to: priority)
        }
      }
    }
  }

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
    let outcome = await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      return await withUnsafeContinuation { (continuation: LoadStateMachine.Continuation) in
        let (decision, event) = withState {
          $0.decide(
            request, needsSync: needsSync, waiter: (waiterID, .task(continuation)),
            byDependent: context != nil, callerCancelled: Task.isCancelled)
        }
        switch decision {
        case .content(let content): continuation.resume(returning: .success(content))
        case .failure(let error): continuation.resume(returning: .failure(error))
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
    switch outcome {
    case .success(let delivery): return delivery
    case .failure(let error): throw error
    }
  }

  /// A waiter leaves before its answer: it alone is resumed with `CancellationError`, and an
  /// attempt that nobody else wants any more is cancelled and put back as it was (SPEC §2). Does
  /// nothing once the waiter was answered.
  final func withdrawWaiter(_ waiterID: UInt64) {
    switch withState({ $0.removeWaiter(waiterID) }) {
    case .gone: break
    case .left(let waiter): waiter.resume(with: .failure(Cancelled.error))
    case .leftLast(let waiter, let effects):
      perform(consume effects)  // observers first, as everywhere
      waiter.resume(with: .failure(Cancelled.error))
    }
  }

  /// The non-async requests: completion handlers and fire-and-forget syncs.
  final func submit(_ request: LoadRequest, completion: LoadStateMachine.Completion?) {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    let waiter = completion.map { (nextUniqueID(), LoadStateMachine.Waiter.completion($0)) }
    let parent = LoadInstrumentation.isActive ? AttemptContext.current : nil  // for the instruments
    let (decision, event) = withState {
      $0.decide(request, needsSync: needsSync, waiter: waiter, byDependent: false, callerCancelled: false)
    }
    // A caller who joins raises the attempt to its priority, as an awaiting caller does.
    if case .joined(let runner) = decision { escalateJoined(runner) }
    AttemptContext.outside {
      switch decision {
      case .content:
        deliver(event, contentChanged: false)
        completion?(nil)
      case .failure(let error):
        deliver(event, contentChanged: false)
        completion?(error)
      case .joined, .none, .started:
        // The answer comes later: a handler the work below ends the attempt for (an observer of
        // the status change that cancels it) runs after this call (`CompletionCall`).
        guard let waiter else { return proceed(decision, event, parent: parent) }
        CompletionCall.run(registering: waiter.0) { proceed(decision, event, parent: parent) }
      }
    }
  }

  /// Delivers the status change of a request whose answer comes later, then starts the attempt
  /// it started, if any: last, so that a fast attempt cannot call the completion handler while
  /// this call is still delivering the status change.
  private func proceed(_ decision: LoadStateMachine.Decision, _ event: LoadStateMachine.StatusEvent?, parent: AttemptContext?) {
    deliver(event, contentChanged: false)
    if case .started(let attempt) = decision { launch(attempt, parent: parent) }
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
    let task = TaskLaunch.start(priority: priority) {
      var holdsGate = gated
      let result = await self.runAttempt(attempt, probe: probe, holdsGate: &holdsGate)
      // Its work returned: no attempt is this task's any more (see `alreadyOutside`).
      AttemptContext.alreadyOutside { self.endAttempt(attempt, with: result, probe: probe, gated: holdsGate) }
    }
    let (cancel, escalate) = withState { $0.attach(.task(task), to: attempt) }
    escalate.ifSome { task.escalatePriority(to: $0) }
    // Cancelled before the task was attached (an observer of `.loading` cancelled it): a task
    // that already runs on another thread may have a cancellation handler, run here at once, as
    // user code (the cancel phase's rule: this may be an attempt's end that started it).
    if cancel { AttemptContext.runningCallbacks { task.cancel() } }
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
    next?.handOff(.success(true))
    if let probe, let facts { probe.end(with: result, current: facts.current, callers: facts.callers) }
    perform(consume effects)
  }

  /// One attempt: declared dependencies, then ``performLoad()``, with this attempt's intent
  /// visible to ``loadDependency(_:)``. When `holdsGate` (the loadable runs one attempt at a
  /// time), the attempt's task first takes the gate (see ``LoadStateMachine/gateBusy``); an
  /// attempt cancelled while it waited for the gate does not run at all, and when its task left
  /// the queue without the gate, `holdsGate` comes back `false`.
  ///
  /// The content comes back in its ``ContentBox``, as the state machine stores it: no
  /// `Result<Content, …>` whose metadata the unspecialized code would look up at run time.
  nonisolated(nonsending) final func runAttempt(
    _ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?, holdsGate: inout Bool
  ) async -> Result<AnyContentBox, any Error> {
    // How many dependencies there are, and the options' object, not copies of the dependencies
    // and the options (see `waitForGate()` below).
    typealias Start = (context: AttemptContext, dependencyCount: Int, options: SharedLoadOptions?)
    /// Under the lock: the context is made and published (so that a wait closing a cycle through
    /// this attempt can find it), and the options this attempt runs with are taken, and how many
    /// of the declared dependencies it loads (those declared by now: they are only ever
    /// appended); `nil` when the attempt is no longer current. The context is made only then: a
    /// list's key scrolled away before its task ran (its attempt cancelled) allocates none.
    func begin(_ state: inout LoadStateMachine) -> Start? {
      guard state.attempt === attempt else { return nil }
      let context = AttemptContext(owner: self, intent: attempt.intent, attemptID: attempt.id, probe: probe)
      attempt.context = context
      guard let extras = state.extras else { return (context, 0, nil) }
      return (context, extras.dependencies.count, extras.settings?.sharedOptions)
    }
    // The gate is almost always free: taken in the same lock as the start, without a
    // continuation.
    let gated = holdsGate
    var gateWasBusy = false
    var start = state.withLock(owner: self) { state -> Start? in
      if gated && !state.tryEnterGate() {
        gateWasBusy = true
        return nil
      }
      return begin(&state)
    }
    if gateWasBusy {
      guard await waitForGate() else {
        holdsGate = false
        return .failure(Cancelled.error)
      }
      start = state.withLock(owner: self) { begin(&$0) }
    }
    guard let (context, dependencyCount, options) = start else { return .failure(Cancelled.error) }
    defer { context.hasEnded.store(true, ordering: .releasing) }
    return await AttemptContext.run(context) {
      do {
        if dependencyCount == 0 && options == nil { return .success(try await loadBoxed(for: context.attemptID)) }
        return .success(try await loadBoxed(after: dependencyCount, under: options?.value, in: context))
      } catch {
        return .failure(error)
      }
    }
  }

  // The rarer paths of an attempt's task are functions of their own, and the declared
  // dependencies are read only there. Inlined, and with the options (~160 bytes) copied
  // into its frames, the task's two largest frames took 688 and 416 bytes: past what the task
  // keeps for frames, so every task malloc'd one more slab of memory (~450 instructions with its
  // free). Now 160 and 208 bytes (#28).

  /// Waits until the gate is this attempt's (see ``LoadStateMachine/gateBusy``): `true`. `false`
  /// when the task is cancelled first — its attempt ended (the cancel of an attempt cancels its
  /// task) —, which leaves the queue at once without the gate: a task whose attempt was cancelled
  /// does not wait there for work that may never return.
  @inline(never)
  nonisolated(nonsending) private func waitForGate() async -> Bool {
    let id = nextUniqueID()
    let admitted = await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
        // The cancel is read in the lock the handler takes: queued before it, or not at all.
        if let answer = self.withState({ $0.enterGate(continuation, id: id, cancelled: Task.isCancelled) }) {
          continuation.resume(returning: answer)
        }
      }
    } onCancel: {
      self.withState { $0.withdrawFromGate(id) }?.handOff(.success(false))
    }
    ContinuationHandoff.awaited()
    return admitted
  }

  /// The attempt's work when it has declared dependencies or options: the first
  /// `dependencyCount` declared dependencies, then ``loadBoxed()`` under the options.
  ///
  /// The dependencies are read here, those that were declared when the attempt began (the
  /// declared dependencies are only ever appended to): a dependency added since applies from the
  /// next attempt.
  @inline(never)
  nonisolated(nonsending) private func loadBoxed(
    after dependencyCount: Int, under options: LoadOptions?, in context: AttemptContext
  ) async throws -> AnyContentBox {
    if dependencyCount > 0 {
      // Copied under the lock, released after it.
      let dependencies = state.withLock(owner: self) { state in
        DeclaredDependencies((state.extras?.dependencies ?? DeclaredDependencies()).prefix(dependencyCount))
      }
      try await loadDeclaredDependencies(dependencies, in: context)
    }
    let attempt = context.attemptID
    guard let options else { return try await loadBoxed(for: attempt) }
    return try await options.run { try await self.loadBoxed(for: attempt) }
  }

  /// The work of the attempt `attempt`: ``directLoad``, or else ``performLoadBoxed()``.
  nonisolated(nonsending) private func loadBoxed(for attempt: UInt64) async throws -> AnyContentBox {
    if let directLoad { return try await directLoad(self, attempt) }
    return try await performLoadBoxed()
  }
}
