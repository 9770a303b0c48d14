import Observation

/// The registrar of a ``ContentLoader/Claim`` that somebody observed, made on the first read of
/// an observable property (``ContentLoader/Claim/snapshot`` or ``ContentLoader/Claim/priority``):
/// a claim nobody reads carries none. Not generic, so it is the same type for every loader.
@usableFromInline
final class ClaimObservation: Sendable {
  let registrar = ObservationRegistrar()

  init() {}

  /// The claim's snapshot was read: `withObservationTracking` (and SwiftUI) track it.
  @usableFromInline func accessSnapshot() {
    registrar.access(ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.snapshot)
  }

  @usableFromInline func accessPriority() {
    registrar.access(ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.priority)
  }

  /// The key's snapshot changed: called outside the loader's lock, in the order of the changes.
  func snapshotChanged() {
    registrar.withMutation(of: ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.snapshot) {}
  }

  func priorityChanged() {
    registrar.withMutation(of: ObservedClaimProperties.shared, keyPath: ObservedClaimProperties.priority) {}
  }
}

/// The observable properties of every claim, named by key paths that are not generic (as
/// `ObservedJobProperties` does for jobs: a key path into a generic class is rebuilt by the
/// runtime on every use inside the library).
final class ObservedClaimProperties: Observable, Sendable {
  static let shared = ObservedClaimProperties()
  static let snapshot = \ObservedClaimProperties.snapshot
  static let priority = \ObservedClaimProperties.priority

  var snapshot: Void { () }
  var priority: Void { () }
}

/// A claim is `Observable`: `withObservationTracking`, and SwiftUI on Apple platforms, see changes
/// to its ``ContentLoader/Claim/snapshot`` (every change of its key that its handlers and streams
/// are told) and its ``ContentLoader/Claim/priority``.
extension ContentLoader.Claim: Observable {}

extension ContentLoaderState {
  /// The claim's registrar, made on first use. While the claim is active, its key's changes are
  /// queued for the registrar as for any observer of the claim (one more sink).
  @usableFromInline
  mutating func observe(_ claim: Loader.Claim) -> ClaimObservation {
    if let observation = claim.observation { return observation }
    let observation = ClaimObservation()
    claim.observation = observation
    if let entry = claim.entry {
      entry.sinks[claim.id, default: []].append(Loader.ClaimSink(id: makeID(), sink: .observation(observation)))
      entry.hasSinks = true
    }
    return observation
  }
}
