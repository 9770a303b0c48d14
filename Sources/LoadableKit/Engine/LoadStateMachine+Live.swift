/// Live views: content that changes outside an attempt, because what it is derived from changed —
/// a `map` or `zip` over a source that loaded again, a paged loadable's page that landed.
extension LoadStateMachine {
  /// The state a live view starts in, derived from its sources as it is created (nobody can
  /// observe it yet, so nothing is delivered): `content` at version 1 when the sources had
  /// content, failed with `failure` when one had failed.
  mutating func startLive(content box: AnyContentBox?, failure: (any Error)?) {
    if let box {
      contentBox = box
      contentVersion = 1
    }
    if let failure {
      phase = .idle(.failed(failure))
    } else if box != nil {
      phase = .idle(.loaded)
    }
  }

  /// What ``update(_:)`` did.
  enum LiveUpdateAction {
    /// Nothing: a failure while an attempt runs (the attempt's outcome decides).
    case none
    /// The content was replaced and counts one more version, the status unchanged: the effects
    /// tell the content's listeners and release the content it replaced.
    case recomputed(Effects)
    /// The loadable failed with the error and kept its content: the effects deliver the change
    /// and release the error it replaced.
    case failed(Effects)

    /// What follows (none for ``none``): carried out by the loadable's performer after the lock.
    var effects: Effects {
      switch self {
      case .none: Effects()
      case .recomputed(let effects), .failed(let effects): effects
      }
    }
  }

  /// The live content was recomputed while no attempt runs. `.success`: the content is replaced
  /// and counts one more version, the status unchanged. `.failure`: the loadable fails with the
  /// error and keeps its content; a failure while an attempt runs changes nothing (the attempt's
  /// outcome decides, and a live view applies changes only while idle).
  mutating func update(_ result: Result<AnyContentBox, any Error>) -> LiveUpdateAction {
    var effects = Effects()
    switch result {
    case .success(let box):
      effects.released.content = contentBox.take()
      contentBox = box
      contentVersion &+= 1
      effects.changedContent = true
      effects.result = .success(delivery)
      return .recomputed(effects)
    case .failure(let failure):
      guard case .idle = phase else { return .none }
      effects.released.error = error  // released after the lock
      effects.event = setPhase(.idle(.failed(failure)))
      effects.result = .failure(failure)
      return .failed(effects)
    }
  }
}
