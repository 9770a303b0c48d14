/// Writing: content set from outside an attempt, as a `ContentLoader` key's local write
/// (`ContentLoader.set(_:version:for:)`) sets a value the app already has.
extension LoadStateMachine {
  /// What ``write(_:)`` did.
  enum WriteAction {
    /// No attempt ran: the loadable is ``LoadStatus/loaded`` with the written content, and the
    /// effects deliver the change and release what the write replaced.
    case wrote(Effects)
    /// The write superseded `attempt`, which ran: the effects cancel its task, answer its waiters
    /// with the written content, and release it and what the write replaced.
    case superseded(Attempt, effects: Effects)

    /// What follows, either way: carried out by the loadable's performer after the lock.
    var effects: Effects {
      switch self {
      case .wrote(let effects), .superseded(_, let effects): effects
      }
    }
  }

  /// Sets `box` as the content, as a successful attempt would: the status becomes
  /// ``LoadStatus/loaded``, the error goes, and the content version counts one more success.
  ///
  /// A running attempt is superseded by the write: it is no longer the current attempt, so its
  /// result, if it still comes, is dropped (``finish(_:with:now:)``); its task is cancelled, and
  /// its waiters are answered with the written content, as if the attempt had returned it — none
  /// of them is failed or cancelled.
  mutating func write(_ box: AnyContentBox) -> WriteAction {
    // The error (a failed key's) goes with the effects, released after the lock.
    var released = Released(attempt: nil, content: contentBox.take(), error: error)
    contentBox = box
    contentVersion &+= 1
    guard case .running(let attempt) = phase else {
      return .wrote(
        Effects(result: .success(delivery), event: setPhase(.idle(.loaded)), changedContent: true, released: released))
    }
    let event = setPhase(.idle(.loaded))
    released.takeHeld(by: attempt)
    let waiters = attempt.takeWaiters()
    let runner = attempt.runner
    released.attempt = attempt
    // Not committed: the content did not come from the attempt's work.
    return .superseded(
      attempt,
      effects: Effects(
        waiters: waiters, result: .success(delivery), event: event, cancel: runner, changedContent: true,
        endedAttempt: true, attemptCommitted: false, released: released))
  }
}
