import Observation

/// A claim is `Observable`: `withObservationTracking`, and SwiftUI on Apple platforms, see changes
/// to its ``ContentLoader/Claim/snapshot`` and its ``ContentLoader/Claim/priority``.
///
/// Through its key's loadable, which is `Observable` already: reading a claim's snapshot reads the
/// key's status, content and error as observed properties of the key's loadable, so every change of
/// the key that claims see reaches the trackers the way the loadable's own observers are told —
/// outside the lock, in order — and one more notification tells them when the key's load leaves
/// the queue of the load limit (``ContentLoader/Snapshot/isWaitingForSlot``). The key's registrar
/// is made on the first read, as any loadable's: a key nobody reads carries none, and a claim adds
/// nothing to what it costs. The claims of a key share it: tracking one claim's priority sees a
/// change of any claim's priority on that key.
extension ContentLoader.Claim: Observable {}

/// The observable property of a claim that its key's loadable does not have, named by a key path
/// that is not generic (as `ObservedProperties` does for loadables).
final class ObservedClaimProperties: Observable, Sendable {
  static let shared = ObservedClaimProperties()
  static let priority = \ObservedClaimProperties.priority

  var priority: Void { () }
}

extension ContentLoader.KeyedLoadable {
  /// A claim's snapshot was read: its trackers depend on the key's status, content and error.
  @usableFromInline
  func accessClaimSnapshot() {
    let registrar = withState { $0.observationRegistrar() }
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadStatus)
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.content)
    registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadError)
  }

  func accessClaimPriority() {
    let registrar = withState { $0.observationRegistrar() }
    registrar.access(ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.priority)
  }

  func claimPriorityChanged() {
    guard hasRegistrar.load(ordering: .acquiring), let box = state.withLock(owner: self, { $0.registrarBox }) else {
      return
    }
    box.registrar.withMutation(of: ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.priority) {}
  }

  /// A change the loadable's observers are not told of (the key's place in the queue): its
  /// trackers are, as of a status change.
  func tellObservers() {
    guard hasRegistrar.load(ordering: .acquiring), let box = state.withLock(owner: self, { $0.registrarBox }) else {
      return
    }
    box.registrar.withMutation(of: ObservedProperties.shared, keyPath: ObservedProperties.loadStatus) {}
  }
}
