/// The rarely used part of a loadable's state, out of line so that an idle loadable stays small.
/// A class, but only ever touched under the loadable's lock, as part of this state: like
/// ``RunningAttempt``'s, its properties skip the dynamic exclusivity checks.
///
/// Not nested in the generic `LoadStateMachine`: nothing in it depends on the content type, and
/// unspecialized code would otherwise look up its generic metadata at run time on every use.
@usableFromInline final class LoadableExtras {
  /// How long the last successful attempt took (for the dependency tree dump).
  @exclusivity(unchecked) var lastDuration: Duration?
  @exclusivity(unchecked) var observers = ObserverRegistry()
  /// Rarely set configuration (options, name).
  @exclusivity(unchecked) var settings: LoadableSettings?
  /// Derived loadables that recompute or go stale when the content changes.
  @exclusivity(unchecked) var contentListeners: [UInt64: ContentListener] = [:]
  /// Declared with `addDependency(_:kind:)`; combinators record their parents here.
  @exclusivity(unchecked) var dependencies: [(loadable: any Loadable, kind: DependencyKind)] = []
  @exclusivity(unchecked) var gateQueue: [UnsafeContinuation<Void, Never>] = []
}

/// A derived loadable's listener, in a struct: a closure stored in a dictionary directly is kept
/// at the dictionary's abstraction, and each one read back needs a thunk allocated around it.
struct ContentListener {
  let call: @Sendable () -> Void
}
