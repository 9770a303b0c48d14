/// Superseding: a fresh attempt that takes the running one's place at once (SPEC §5, "Nothing
/// waits behind a stale or abandoned load").
///
/// A `ContentLoader` key's load is a function of its key, not of an instance's state, so a
/// refresh need not wait for a load that may return data from before the change: the running
/// attempt is replaced by a fresh one, which inherits its waiters (callers, completion handlers,
/// dependents) and its interest (the key's claims), and the old one's task is cancelled. Nothing
/// of the old attempt can land afterwards: ``LoadStateMachine/finish(_:with:now:)`` drops the
/// result of an attempt that is not the current one, whatever it holds.
extension LoadStateMachine {
  /// What ``supersede(intent:)`` did.
  enum SupersedeAction {
    /// No attempt runs: nothing to supersede (the caller starts one, if it wants one).
    case idle
    /// The running attempt has the same intent and its work has not started yet: it is already
    /// the fresh load (two refreshes before the fresh load started count as one).
    case coalesced(Attempt)
    /// `fresh` replaced `superseded` as the current attempt: the caller launches `fresh` and
    /// performs `effects` (which cancel the superseded attempt's task and release it), after
    /// leaving the lock.
    case superseded(fresh: Attempt, superseded: Attempt, effects: Effects)
  }

  /// Replaces the running attempt with a fresh one with `intent`, at once.
  ///
  /// The fresh attempt takes the waiters, the interest, and what the loadable looked like before
  /// the superseded attempt (so a cascading cancel of the fresh one restores that); the status
  /// stays ``LoadStatus/loading``. The superseded attempt's task is cancelled, and its result,
  /// if it still comes, is dropped.
  mutating func supersede(intent: LoadIntent) -> SupersedeAction {
    guard let old = attempt else { return .idle }
    if old.intent == intent && old.context == nil && !old.finished { return .coalesced(old) }
    let fresh = Attempt(id: nextUniqueID(), intent: intent, superseding: old)
    phase = .running(fresh)  // the superseded attempt is handed back, released after the lock
    var effects = Effects()
    effects.cancel = old.runner
    effects.released.takeHeld(by: old)  // the fresh attempt holds its own copies of what came before
    return .superseded(fresh: fresh, superseded: old, effects: effects)
  }
}

extension AsyncLoadable {
  /// ``LoadStateMachine/supersede(intent:)`` under the loadable's lock. The caller launches the
  /// fresh attempt (``launch(_:parent:priority:)``) and performs the effects after leaving every
  /// lock.
  final func supersede(intent: LoadIntent) -> LoadStateMachine.SupersedeAction {
    withState { $0.supersede(intent: intent) }
  }
}
