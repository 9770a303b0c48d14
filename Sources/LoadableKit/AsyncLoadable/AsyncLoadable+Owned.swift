/// Owned attempts: an attempt that its owner starts, drives and ends, for a ``Job``'s run.
///
/// A job's run is an attempt of the core, like a loadable's load and a `ContentLoader` key's: the
/// callers of ``Job/output`` are the attempt's waiters (a caller that leaves frees its slot at
/// once), and the end is stored and delivered by the core's one performer, in its one order.
/// What differs is who decides: nobody may *start* a job by awaiting it, so ``awaitOutcome()``
/// joins the attempt (preparing it when none exists yet, without starting a task), the owner
/// starts its task (``launchOwnedAttempt(_:)``), and the owner says how it ended
/// (``conclude(with:)``): before its task returns, or without a task at all (a job cancelled
/// before it ran). The outcome is the owner's alone, stored once, in the attempt.
extension LoadStateMachine {
  /// The attempt callers join and the owner launches: the current one, or a new one that nobody
  /// else can cancel (it is *wanted*, so a caller leaving never cascades).
  mutating func prepareOwnedAttempt() -> (Attempt, StatusEvent?) {
    switch phase {
    case .running(let attempt):
      return (attempt, nil)
    case .idle(let outcome):
      let attempt = Attempt(id: nextUniqueID(), intent: .load, byDependent: false, after: outcome, content: contentBox)
      return (attempt, setPhase(.running(attempt)))
    }
  }

  /// A caller of the owned attempt's outcome: answered at once when it is known (or the caller is
  /// cancelled), otherwise added to the attempt's waiters; never starts anything.
  mutating func joinOwnedAttempt(
    _ waiter: (id: UInt64, waiter: Waiter), callerCancelled: Bool
  ) -> (Result<Delivery, any Error>?, StatusEvent?) {
    switch phase {
    case .idle(.loaded): return (.success(delivery), nil)
    case .idle(.failed(let error)): return (.failure(error), nil)
    case .idle(.notLoaded), .running:
      if callerCancelled { return (.failure(CancellationError()), nil) }
      let (attempt, event) = prepareOwnedAttempt()
      attempt.add(waiter)
      return (nil, event)
    }
  }

  /// The owner's word on how its attempt ended: the current attempt (launched or not) ends with
  /// `result`; without one the outcome is stored all the same, so later callers get it at once.
  /// An outcome already stored is final.
  mutating func conclude(with result: Result<AnyContentBox, any Error>, now: MonotonicInstant) -> EndAction {
    guard attempt != nil || status == .notLoaded else { return .none }
    // Without an attempt (nobody waited, and the job never ran) one is made to carry the outcome.
    let (attempt, started) = prepareOwnedAttempt()
    var effects = finish(attempt, with: result, now: now)
    if started?.startDelivery == true { effects.event?.startDelivery = true }
    return .ended(effects)
  }
}

extension AsyncLoadable {
  /// Waits for the outcome of the owned attempt, never starting one.
  ///
  /// Returns or throws at once when the outcome is known. Cancelling the calling task makes this
  /// call alone throw `CancellationError`, and frees its waiter slot at once.
  nonisolated(nonsending) final func awaitOutcome() async throws -> Content {
    if let known = knownOutcome { return try known.get() }
    let waiterID = nextUniqueID()
    let outcome = await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      return await withUnsafeContinuation { (continuation: LoadStateMachine.Continuation) in
        let (answer, event) = withState {
          $0.joinOwnedAttempt((waiterID, .task(continuation)), callerCancelled: Task.isCancelled)
        }
        if let answer { continuation.resume(returning: answer) }
        AttemptContext.outside { deliver(event, contentChanged: false) }
      }
    } onCancel: {
      withdrawWaiter(waiterID)
    }
    let delivery: LoadDelivery
    switch outcome {
    case .success(let value): delivery = value
    case .failure(let error): throw error
    }
    guard let content = delivery.content(as: Content.self) else { throw CancellationError() }
    return content
  }

  /// The outcome, once it is known (the last attempt ended, or the loadable was made with one).
  final var knownOutcome: Result<Content, any Error>? {
    state.withLock(owner: self) { state -> Result<Content, any Error>? in
      switch state.phase {
      case .idle(.loaded): state.content(as: Content.self).map { .success($0) }
      case .idle(.failed(let error)): .failure(error)
      case .idle(.notLoaded), .running: nil
      }
    }
  }

  /// Starts the task of the owned attempt (preparing the attempt when nobody waits yet), running
  /// `operation`, which ends the attempt before it returns: the owner says how
  /// (``conclude(with:)``), and the outcome is stored once, in the attempt. The task keeps the
  /// loadable alive until it ends.
  @discardableResult
  final func launchOwnedAttempt(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
    let (attempt, event) = withState { $0.prepareOwnedAttempt() }
    AttemptContext.outside { deliver(event, contentChanged: false) }
    let task = TaskLaunch.start {
      await operation()
      // Its callers would wait for ever: a broken contract traps in a debug build, and fails them
      // in a release build.
      guard self.withState({ $0.attempt === attempt }) else { return }
      assertionFailure("an owned attempt's task returned before its owner concluded it")
      self.conclude(with: .failure(CancellationError()))
    }
    let (cancel, escalate) = withState { $0.attach(.task(task), to: attempt) }
    escalate.ifSome { task.escalatePriority(to: $0) }
    if cancel { AttemptContext.runningCallbacks { task.cancel() } }  // as in `launch`
    return task
  }

  /// Cancels the task of the running attempt, if it has one, without ending the attempt: its
  /// owner decides how it ends.
  final func cancelOwnedAttemptTask() {
    if case .task(let task)? = state.withLock(owner: self, { $0.attempt?.runner }) { task.cancel() }
  }

  /// Ends the owned attempt with `result` (see ``LoadStateMachine/conclude(with:now:)``) and
  /// performs the effects: observers first, then the waiters resume, then what was let go of is
  /// released.
  final func conclude(with result: Result<Content, any Error>) {
    let result = result.boxed()
    let now = MonotonicInstant.now  // read before the lock, as `endAttempt` does
    perform(withState { $0.conclude(with: result, now: now) })
  }

  /// How many waiter slots the running attempt stores, those of waiters that left included (for
  /// tests: a caller that leaves must not leave its slot behind).
  var storedWaiterSlotCount: Int { state.withLock(owner: self) { $0.attempt?.storedWaiterCount ?? 0 } }
}
