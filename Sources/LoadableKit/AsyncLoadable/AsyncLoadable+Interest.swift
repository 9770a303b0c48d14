/// Interest: what keeps an attempt alive without waiting for it.
///
/// A `ContentLoader` key's loadable is loaded on behalf of the key's claims. Claims do not wait
/// for the attempt, yet while any is active the attempt must go on; and when the last one ends, an
/// attempt that only the claims wanted is cancelled and the loadable goes back to the status,
/// content and error it had before — exactly what happens to an attempt a dependent started when
/// its last waiter leaves (``LoadStateMachine/removeWaiter(_:)``). So the claims hold one unit of
/// *interest* in the attempt, counted next to the waiters, and an attempt they start is started as
/// a dependent starts one: not wanted by anyone else.
extension LoadStateMachine {
  /// What ``addInterest(starting:)`` did.
  struct InterestOutcome {
    /// The attempt that now holds the interest, if any.
    var held: Attempt?
    /// A new attempt, whose task the caller launches after leaving the lock.
    var started: Attempt?
    var event: StatusEvent?
  }

  /// Adds one unit of interest to the running attempt; when none runs and `intent` is given,
  /// starts an attempt that only this interest wants.
  mutating func addInterest(starting intent: LoadIntent?) -> InterestOutcome {
    switch phase {
    case .running(let attempt):
      attempt.interest += 1
      return InterestOutcome(held: attempt)
    case .idle(let outcome):
      guard let intent else { return InterestOutcome() }
      let attempt = Attempt(id: nextUniqueID(), intent: intent, byDependent: true, after: outcome, content: contentBox)
      attempt.interest = 1
      return InterestOutcome(held: attempt, started: attempt, event: setPhase(.running(attempt)))
    }
  }

  /// Removes the unit of interest `held` holds. When `held` is still running and nobody else wants
  /// it or waits for it, it is cancelled and the loadable goes back to how it was before it.
  mutating func removeInterest(from held: Attempt) -> EndAction {
    guard held.interest > 0 else { return .none }
    held.interest -= 1
    guard let attempt, attempt === held, case .forDependents = attempt.standing,
      attempt.waitingCount == 0, attempt.interest == 0
    else { return .none }
    return .ended(cancelAndRestore(attempt))
  }
}

extension AsyncLoadable {
  /// ``LoadStateMachine/addInterest(starting:)`` under the loadable's lock. The caller launches
  /// the started attempt (``launch(_:)``) and delivers the event after leaving every lock.
  final func addInterest(starting intent: LoadIntent?) -> LoadStateMachine.InterestOutcome {
    withState { $0.addInterest(starting: intent) }
  }

  /// ``LoadStateMachine/removeInterest(from:)`` under the loadable's lock; the caller performs
  /// the effects (``perform(_:)``) after leaving every lock.
  final func removeInterest(from held: LoadStateMachine.Attempt) -> EndAction {
    withState { $0.removeInterest(from: held) }
  }

  /// The state a keyed view needs, in one read: the snapshot, the count of successful attempts,
  /// the running attempt, and whether `previous` (an attempt seen earlier) has returned.
  @inlinable
  final func interestView(since previous: LoadStateMachine.Attempt?) -> (
    snapshot: LoadSnapshot<Content>, contentVersion: UInt64, attempt: LoadStateMachine.Attempt?,
    previousFinished: Bool
  ) {
    state.withLock(owner: self) { state in
      (state.snapshot(as: Content.self), state.contentVersion, state.attempt, previous?.finished ?? false)
    }
  }

  /// ``interestView(since:)`` without the snapshot, so without copies of user values: what a
  /// keyed view needs when nobody observes the key (no copy to release after the lock).
  /// `failedByCancellation`: the status is failed with `CancellationError`.
  final func interestState(since previous: LoadStateMachine.Attempt?) -> (
    status: LoadStatus, contentVersion: UInt64, attempt: LoadStateMachine.Attempt?,
    previousFinished: Bool, failedByCancellation: Bool
  ) {
    state.withLock(owner: self) { state in
      (
        state.status, state.contentVersion, state.attempt, previous?.finished ?? false,
        state.status == .failed && state.error is CancellationError
      )
    }
  }

  /// How the attempt before `attempt` ended, if `attempt` started after it had ended; read under
  /// the lock, where the attempt's record of it changes (when `attempt` ends).
  final func end(before attempt: LoadStateMachine.Attempt) -> EndBefore {
    state.withLock(owner: self) { _ in EndBefore.of(attempt).end }
  }

  /// The error the attempt before `attempt` failed with, if `attempt` started after that failure:
  /// a copy, which the caller releases after its own lock.
  final func error(before attempt: LoadStateMachine.Attempt) -> (any Error)? {
    state.withLock(owner: self) { _ in EndBefore.of(attempt).error }
  }
}

/// How the attempt before the running one ended, when the running one started after it had ended
/// (not in its place, as a supersede's does): a keyed view that reads the key after both changes
/// tells both (``ContentLoaderState/sync(_:_:)``). Read under the loadable's lock: the attempt's
/// record of it changes when the attempt ends.
enum EndBefore: UInt8, Sendable {
  /// No attempt runs, it took a running one's place, or the one before it was cancelled or never ran.
  case none
  case loaded
  /// Failed, other than by cancellation.
  case failed

  /// For `attempt`; with a copy of the error when it failed. Under the loadable's lock.
  static func of(_ attempt: LoadStateMachine.Attempt?) -> (end: EndBefore, error: (any Error)?) {
    guard let attempt, !attempt.tookARunningOnesPlace else { return (.none, nil) }
    switch attempt.previousOutcome {
    case .loaded: return (.loaded, nil)
    case .failed(let error) where !(error is CancellationError): return (.failed, error)
    default: return (.none, nil)
    }
  }
}
