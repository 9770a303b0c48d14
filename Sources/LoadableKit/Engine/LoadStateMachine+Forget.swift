/// Forgetting: the content dropped from outside an attempt, as a `ContentLoader` key removed
/// (`ContentLoader.remove(_:)`) drops its value.
extension LoadStateMachine {
  /// What ``forget()`` did.
  struct ForgetOutcome {
    /// A fresh attempt that took the running one's place, which the caller launches after
    /// leaving the lock; `nil` when none ran.
    var fresh: Attempt?
    /// The attempt it superseded.
    var superseded: Attempt?
    var effects: Effects
  }

  /// Drops the content and the error. With no attempt running, the status becomes
  /// ``LoadStatus/notLoaded``. A running attempt — it may return the data being dropped — is
  /// superseded by a fresh one that takes its waiters and interest (nobody is failed), and whose
  /// cancellation restores the empty state, not the dropped content.
  mutating func forget() -> ForgetOutcome {
    // The error goes with the effects, released after the lock (a `deinit` is user code).
    var released = Released(attempt: nil, content: contentBox.take(), error: error)
    guard case .running(let old) = phase else {
      return ForgetOutcome(effects: Effects(event: setPhase(.idle(.notLoaded)), changedContent: true, released: released))
    }
    let fresh = Attempt(id: nextUniqueID(), intent: .refresh, superseding: old, forgetting: true)
    phase = .running(fresh)
    released.context = old.context.take()
    let effects = Effects(cancel: old.runner, changedContent: true, released: released)
    return ForgetOutcome(fresh: fresh, superseded: old, effects: effects)
  }
}

extension AsyncLoadable {
  /// ``LoadStateMachine/forget()`` under the loadable's lock.
  final func forget() -> LoadStateMachine.ForgetOutcome {
    withState { $0.forget() }
  }
}
