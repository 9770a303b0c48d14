/// Forgetting: the content dropped from outside an attempt, as a `ContentLoader` key removed
/// (`ContentLoader.remove(_:)`) drops its value.
extension LoadStateMachine {
  /// What ``forget()`` did.
  enum ForgetAction {
    /// No attempt ran: the loadable is ``LoadStatus/notLoaded``, and the effects deliver the change
    /// and release what it dropped.
    case cleared(Effects)
    /// `fresh` replaced `superseded` as the current attempt, as ``supersede(intent:)`` replaces
    /// one: the caller launches `fresh` and performs `effects` (which cancel the superseded
    /// attempt's task and release what was dropped), after leaving the lock.
    case superseded(fresh: Attempt, superseded: Attempt, effects: Effects)
  }

  /// Drops the content and the error. With no attempt running, the status becomes
  /// ``LoadStatus/notLoaded``. A running attempt — it may return the data being dropped — is
  /// superseded by a fresh one that takes its waiters and interest (nobody is failed), and whose
  /// cancellation restores the empty state, not the dropped content.
  mutating func forget() -> ForgetAction {
    // The error goes with the effects, released after the lock (a `deinit` is user code).
    var released = Released(attempt: nil, content: contentBox.take(), error: error)
    guard case .running(let old) = phase else {
      return .cleared(Effects(event: setPhase(.idle(.notLoaded)), changedContent: true, released: released))
    }
    let fresh = Attempt(id: nextUniqueID(), intent: .refresh, superseding: old, forgetting: true)
    phase = .running(fresh)
    released.takeHeld(by: old)
    return .superseded(
      fresh: fresh, superseded: old, effects: Effects(cancel: old.runner, changedContent: true, released: released))
  }
}
