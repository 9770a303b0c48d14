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
    var released = Released(attempt: nil, content: contentBox.take(), error: error.take())
    contentBox = box
    contentVersion &+= 1
    guard let attempt = attempt.take() else {
      return Effects(result: .success(delivery), event: setStatus(.loaded), changedContent: true, released: released)
    }
    released.context = attempt.context.take()
    let waiters = attempt.takeWaiters()
    let task = attempt.task
    let driver = attempt.driver
    released.attempt = consume attempt
    // Not committed: the content did not come from the attempt's work.
    return Effects(
      waiters: waiters, result: .success(delivery), event: setStatus(.loaded), cancelTask: task,
      cancelDriver: driver, changedContent: true, endedAttempt: true, attemptCommitted: false, released: released)
  }
}
