/// Writing: content set from outside an attempt, as a `ContentLoader` key's local write
/// (`ContentLoader.set(_:version:for:)`) sets a value the app already has.
extension LoadStateMachine {
  /// Sets `box` as the content, as a successful attempt would: the status becomes
  /// ``LoadStatus/loaded``, the error goes, and the content version counts one more success.
  ///
  /// A running attempt is superseded by the write: it is no longer the current attempt, so its
  /// result, if it still comes, is dropped (``finish(_:with:now:)``); its task is cancelled, and
  /// its waiters are answered with the written content, as if the attempt had returned it — none
  /// of them is failed or cancelled.
  mutating func write(_ box: AnyContentBox) -> Effects {
    // The error (a failed key's) goes with the effects, released after the lock.
    var released = Released(attempt: nil, content: contentBox.take(), error: error)
    contentBox = box
    contentVersion &+= 1
    guard case .running(let attempt) = phase else {
      return Effects(result: .success(delivery), event: setPhase(.idle(.loaded)), changedContent: true, released: released)
    }
    let event = setPhase(.idle(.loaded))
    released.context = attempt.context.take()
    let waiters = attempt.takeWaiters()
    let runner = attempt.runner
    released.attempt = consume attempt
    // Not committed: the content did not come from the attempt's work.
    return Effects(
      waiters: waiters, result: .success(delivery), event: event, cancel: runner, changedContent: true, endedAttempt: true, attemptCommitted: false, released: released)
  }
}
