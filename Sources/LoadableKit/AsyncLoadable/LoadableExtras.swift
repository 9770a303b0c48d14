/// The rarely used part of a loadable's state, out of line so that an idle loadable stays small.
/// A class, but only ever touched under the loadable's lock, as part of this state.
///
/// Not nested in the generic `LoadStateMachine`: nothing in it depends on the content type, and
/// unspecialized code would otherwise look up its generic metadata at run time on every use.
@usableFromInline final class LoadableExtras {
  /// How long the last successful attempt took (for the dependency tree dump).
  var lastDuration: Duration?
  var observers = ObserverRegistry()
  /// Rarely set configuration (options, name).
  var settings: LoadableSettings?
  /// Derived loadables that recompute or go stale when the content changes.
  var contentListeners: [UInt64: ContentListener] = [:]
  /// Declared with `addDependency(_:kind:)`; combinators record their parents here.
  var dependencies: [(loadable: any Loadable, kind: DependencyKind)] = []
  var gateQueue: [UnsafeContinuation<Void, Never>] = []
}

/// A derived loadable's listener, in a struct: a closure stored in a dictionary directly is kept
/// at the dictionary's abstraction, and each one read back needs a thunk allocated around it.
struct ContentListener {
  let call: @Sendable () -> Void
}
