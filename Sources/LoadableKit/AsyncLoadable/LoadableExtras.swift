/// The rarely used part of a loadable's state, out of line so that an idle loadable stays small.
/// A class, but only ever touched under the loadable's lock, as part of this state: like
/// ``RunningAttempt``'s, its properties skip the dynamic exclusivity checks.
///
/// Not nested in the generic `LoadStateMachine`: nothing in it depends on the content type, and
/// unspecialized code would otherwise look up its generic metadata at run time on every use.
@usableFromInline final class LoadableExtras {
  /// How long the last successful attempt took, in nanoseconds (for the dependency tree dump;
  /// made a `Duration` only there).
  @exclusivity(unchecked) var lastDuration: UInt64?
  @exclusivity(unchecked) var observers = ObserverRegistry()
  /// Rarely set configuration (options, name).
  @exclusivity(unchecked) var settings: LoadableSettings?
  /// Derived loadables that recompute or go stale when the content changes.
  @exclusivity(unchecked) var contentListeners = ContentListeners()
  /// Declared with `addDependency(_:kind:)`; combinators record their parents here.
  @exclusivity(unchecked) var dependencies: [(loadable: any Loadable, kind: DependencyKind)] = []
  /// The tasks waiting for the gate, first come first served.
  @exclusivity(unchecked) var gateQueue = WaiterStore<UnsafeContinuation<Void, Never>>()
}

/// A derived loadable's listener, in a struct: a closure stored in a dictionary directly is kept
/// at the dictionary's abstraction, and each one read back needs a thunk allocated around it.
struct ContentListener {
  let call: @Sendable () -> Void
}

/// A loadable's content listeners: the first inline, since most loadables have one (a `map` over
/// them), and the others in a dictionary, each an allocation.
struct ContentListeners {
  private var first: (id: UInt64, listener: ContentListener)?
  private var more: [UInt64: ContentListener] = [:]

  var isEmpty: Bool { first == nil && more.isEmpty }

  /// The listener when there is exactly one.
  var only: ContentListener? {
    if more.isEmpty { return first?.listener }
    return first == nil && more.count == 1 ? more.first!.value : nil
  }

  /// Every listener, in no particular order.
  var all: [ContentListener] {
    var all = Array(more.values)
    if let first { all.append(first.listener) }
    return all
  }

  mutating func add(_ listener: ContentListener, id: UInt64) {
    if first == nil { first = (id, listener) } else { more[id] = listener }
  }

  /// Removes the listener `id` and returns it (to be released after the lock).
  mutating func remove(_ id: UInt64) -> ContentListener? {
    if let first, first.id == id {
      self.first = nil
      return first.listener
    }
    return more.removeValue(forKey: id)
  }
}
