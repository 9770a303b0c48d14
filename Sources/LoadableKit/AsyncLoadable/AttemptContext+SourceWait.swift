// An attempt without a task that has one source (a `map`'s, a `zip` of one): its one waiter on the
// source's attempt, kept by the attempt's context, which is also the attempt's driver. A `flatMap`'s
// attempt waits so twice, one wait after the other: for its source, then for the loadable its
// transform returned.
//
// It is a ``DependencyGroup`` of one node without the group: the same rules (the edge of the
// wait-for graph recorded and checked before the wait begins, and ended before the outcome is
// handed on; the source told when a ranked wait ends; a cancel withdraws the wait; a raised
// priority passed on while it waits; the outcome decided once, by the answer or by a cancel,
// whichever comes first), with the one waiter the source resumes exactly once — by its attempt's
// end, or by the withdrawal, with `CancellationError`. A node of a `map` chain paid a group a load
// (an object with its own lock, made, locked four times and released) to wait for one thing.

extension AttemptContext {
  /// Who is handed the outcome: the attempt and its instruments' probe.
  typealias Finish = (attempt: RunningAttempt, probe: AttemptProbe?)

  /// The pending wait for the source (``State/sourceWait``): what ``sourceArrived(_:)`` hands the
  /// outcome to, and what a cancel withdraws.
  ///
  /// The source itself is the node of the wait's edge (``State/firstWait``): kept once, as the
  /// edge holds it, not copied here too (each copy of a `map` is a retain and a release, on the
  /// slow path a view's weak references give it).
  struct SourceWait {
    let sourceID: ObjectIdentifier
    let waiterID: UInt64
    /// Who is handed the outcome, once: taken by the answer, or by a cancel that comes first (the
    /// wait then stays until the withdrawn waiter arrives, as an edge of an attempt that is over).
    var finish: Finish?
    // The one-byte fields last: no padding inside, and the context's state ends with them.
    /// Whether the source ranks its load by who waits (``AsyncLoadable/callerWillWait(_:)``): it is
    /// then told when the wait ends.
    var ranked = false
    /// The highest priority passed on to the source so far.
    var escalated = RawPriority.none
  }

  /// Waits for `source` for `attempt` of the context's owner, which runs without a task, as
  /// ``DependencyGroup/begin(_:in:for:probe:)`` waits for several: the owner's
  /// ``DependencyNode/dependenciesDecided(_:attempt:context:probe:)`` is called once, with the
  /// source's delivery or its failure, after the locks are released (at once, on this thread, when
  /// the source answers without a wait). Returns the context, the attempt's driver while the wait
  /// lasts, or `nil` when it was decided at once.
  ///
  /// `ofInnerLoadable`: the wait of a `flatMap`'s attempt for the loadable its transform returned,
  /// begun while the context is already the attempt's driver. That loadable's answer at once is
  /// taken as a request's is (content while it refreshes, for a request if needed), and a cancel
  /// that comes while the waiter joins withdraws it once it has.
  func beginSourceWait(
    on source: any DependencyNode, for attempt: RunningAttempt, probe: AttemptProbe?, ofInnerLoadable: Bool = false
  ) -> AttemptContext? {
    func decided(_ outcome: DependencyGroup.Outcome) -> AttemptContext? {
      owner.dependenciesDecided(outcome, attempt: attempt, context: self, probe: probe)
      return nil
    }
    var request = self.request(for: source)
    switch source.immediateAnswer(to: request) {
    case .success(let delivery)?:
      // A loaded source's content is its answer; one that answered at once while it loads (asked
      // if needed) is waited for with a plain load, as the group does.
      if ofInnerLoadable || source.erasedState.status == .loaded {
        var deliveries = DependencyGroup.Deliveries()
        deliveries.append(delivery)
        return decided(.success(deliveries))
      }
      request = .load
    case .failure(let error)?: return decided(.failure(error))
    case nil: break
    }
    do {
      try beginWait(on: source)
    } catch {
      return decided(.failure(error))
    }
    let waiterID = nextUniqueID()
    var wait = SourceWait(sourceID: ObjectIdentifier(source), waiterID: waiterID, finish: (attempt, probe))
    // Nothing arrives before the waiter joins: the flag is set before anyone can read it. A `map`'s
    // wait is begun before the context becomes the attempt's driver, so no cancel comes first; a
    // `flatMap`'s second wait is begun while it is the driver, so a cancel that came first (and
    // found no wait to withdraw) is found here, in the lock that installs the wait.
    // Likewise a priority raised between a `flatMap`'s waits goes on to the second.
    var raised = RawPriority.none
    let begun = AttemptContext.outside { () -> Bool in
      wait.ranked = source.callerWillWait(self)
      let begun = state.withLock(owner: self) { state -> Bool in
        if state.cancelled { return false }
        raised = state.nextWaitPriority
        state.nextWaitPriority = .none
        wait.escalated = raised
        state.sourceWait = wait
        return true
      }
      if begun { source.joinAsDependent(request, from: self, waiterID: waiterID, waiter: .source(self)) }
      return begun
    }
    guard begun else {
      if wait.ranked { source.callerStoppedWaiting(self) }
      endWait(on: source)
      return decided(.failure(CancellationError()))
    }
    // A cancel between the wait's installation and the join found no waiter to withdraw (it
    // decided the outcome): the waiter that joined since is withdrawn now, so that an attempt only
    // this one wanted is undone. (Withdrawn twice when the cancel came after the join: the second
    // finds nothing.)
    if ofInnerLoadable, state.withLock(owner: self, { $0.cancelled }) {
      source.withdrawWaiter(waiterID)
      return self
    }
    raised.ifSome { priority in Trampoline.run { source.escalateRunningAttempt(to: priority) } }
    return self
  }

  /// The source delivered, or failed, or the wait was withdrawn (`CancellationError`): arrives
  /// exactly once, from the source. The edge ends in the same lock as the wait, and a ranked
  /// source hears that the wait ended, before the outcome is handed on — unless a cancel decided
  /// it first (``cancel()``).
  func sourceArrived(_ result: Result<LoadDelivery, any Error>) {
    // What the wait held is moved out, and released after the lock.
    typealias Ended = (finish: Finish?, ranked: Bool, source: (any DependencyNode)?)
    let ended = state.withLock(owner: self) { state -> Ended in
      guard var wait = state.sourceWait.take() else { return (nil, false, nil) }
      // The edge's node (it may be the last reference to the source).
      return (wait.finish.take(), wait.ranked, state.removeWait(wait.sourceID) ?? state.waitedNode(wait.sourceID))
    }
    if ended.ranked { ended.source?.callerStoppedWaiting(self) }
    guard let finish = ended.finish else { return }  // no wait, or a cancel decided already
    let outcome = result.map { delivery in
      var deliveries = DependencyGroup.Deliveries()
      deliveries.append(delivery)
      return deliveries
    }
    owner.dependenciesDecided(outcome, attempt: finish.attempt, context: self, probe: finish.probe)
  }
}

extension AttemptContext: AttemptDriver {
  /// The attempt was cancelled: the outcome is `CancellationError`, decided now (or, with no wait
  /// pending, when the next one would begin), and the wait is withdrawn first (the source resumes
  /// the waiter, which then only ends the edge). An answer
  /// already on its way — the source's attempt ended and is still telling its observers — arrives
  /// after the decision and is dropped, as a group drops it: the transform does not run for an
  /// attempt that was cancelled.
  func cancel() {
    typealias Decided = (source: any DependencyNode, waiterID: UInt64, finish: Finish)
    // Read in place, not copied: a copy of the wait would be released in the lock.
    let decided = state.withLock(owner: self) { state -> Decided? in
      state.cancelled = true
      guard state.sourceWait?.finish != nil, let sourceID = state.sourceWait?.sourceID,
        let source = state.waitedNode(sourceID)
      else { return nil }
      return (source, state.sourceWait!.waiterID, state.sourceWait!.finish.take()!)
    }
    guard let decided else { return }
    decided.source.withdrawWaiter(decided.waiterID)
    owner.dependenciesDecided(
      .failure(CancellationError()), attempt: decided.finish.attempt, context: self, probe: decided.finish.probe)
  }

  /// Passes a raised priority on to the source while it is awaited, once per higher priority;
  /// between two waits (a `flatMap`'s), on to the next one when it begins.
  func escalate(to priority: TaskPriority) {
    let raised = RawPriority(priority)
    var wentOnTo: Task<Void, Never>?
    let source = state.withLock(owner: self) { state -> (any DependencyNode)? in
      wentOnTo = state.recordRaise(raised)
      guard state.sourceWait != nil else {
        if raised > state.nextWaitPriority { state.nextWaitPriority = raised }
        return nil
      }
      guard state.sourceWait!.finish != nil, raised > state.sourceWait!.escalated else { return nil }
      state.sourceWait!.escalated = raised
      return state.waitedNode(state.sourceWait!.sourceID)
    }
    wentOnTo?.escalatePriority(to: priority)  // the task it went on on (`goOnOnATask`), if any
    guard let source else { return }
    Trampoline.run { source.escalateRunningAttempt(to: priority) }
  }
}
