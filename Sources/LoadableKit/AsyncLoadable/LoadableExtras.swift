/// The rarely used part of a loadable's state, out of line so that an idle loadable stays small.
/// A class, but only ever touched under the loadable's lock, as part of this state: like
/// ``RunningAttempt``'s, its properties skip the dynamic exclusivity checks.
///
/// Not nested in the generic `LoadStateMachine`: nothing in it depends on the content type, and
/// unspecialized code would otherwise look up its generic metadata at run time on every use.
@usableFromInline final class LoadableExtras {
  @exclusivity(unchecked) var observers = ObserverRegistry()
  /// Rarely set configuration (options, name).
  @exclusivity(unchecked) var settings: LoadableSettings?
  /// Derived loadables that recompute or go stale when the content changes.
  @exclusivity(unchecked) var contentListeners = ContentListeners()
  /// Declared with `addDependency(_:kind:)`; combinators record their parents here.
  @exclusivity(unchecked) var dependencies = DeclaredDependencies()
  /// The tasks waiting for the gate, first come first served.
  @exclusivity(unchecked) var gateQueue = WaiterStore<UnsafeContinuation<Bool, Never>>()
}

/// A loadable's declared dependencies, the first inline: most loadables that have any have one
/// (a `map`'s source, a layer's table), and an array would be one more allocation each.
typealias DeclaredDependencies = InlineFirstArray<(dependency: DeclaredDependency, kind: DependencyKind)>

/// A declared dependency, told apart once, when it is declared: one of the library's loadables,
/// which an attempt waits for without a task, or another conformer of ``Loadable``, which it
/// calls. Told apart on every load, it was a protocol-conformance look-up per dependency per
/// attempt (`as? any DependencyNode`: some 500 instructions each, 100 a load of the map graph).
enum DeclaredDependency: Sendable {
  case node(any DependencyNode)
  case other(any Loadable)

  init(_ loadable: any Loadable) {
    if let node = loadable as? any DependencyNode { self = .node(node) } else { self = .other(loadable) }
  }

  var loadable: any Loadable {
    switch self {
    case .node(let node): node
    case .other(let loadable): loadable
    }
  }
}

/// A derived loadable that hears when a source's content changed (a live view).
protocol ContentListening: AnyObject, Sendable {
  func sourceContentChanged()
}

/// A derived loadable listening to a source, held weakly: a view does not keep itself alive
/// through its sources.
struct ContentListener {
  weak var target: (any ContentListening)?
}

/// A loadable's content listeners: the views themselves, held weakly, rather than closures around
/// them (a closure's context was one more allocation for every view made). The first is inline,
/// since most loadables have one (a `map` over them), and the others in a dictionary, each an
/// allocation.
///
/// The one listener's weak reference is not copied but read where it is kept, strongly, under the
/// loadable's lock (a copy of a weak reference costs as much as the read, and a structure holding
/// one is copied through the runtime's generic value operations); the reference read leaves the
/// lock. Several are copied out weakly: none is read under the lock, where the strong reference
/// a read makes would be released, and could be a view's last (its `deinit` takes this lock).
struct ContentListeners {
  /// The first listener's identifier (identifiers start at 1), 0 for none.
  private var firstID: UInt64 = 0
  private var first = ContentListener()
  /// The first listener's identity, compared without reading its weak reference.
  private var firstObject: ObjectIdentifier?
  private var more: [UInt64: ContentListener] = [:]

  /// The views to tell of a change: `one`, read strongly, when there is exactly one listener (a
  /// view being freed reads as none); otherwise `several`, weakly, each read when it is told. None,
  /// and `handed` true, when `handed` is the one listener (see
  /// ``AsyncLoadable/notifyContentListeners(except:)``).
  ///
  /// Mutating only so that it reads the listeners where they are: a structure holding a weak
  /// reference, read through the class that keeps it, was copied (and destroyed) for each
  /// property read, twice a notice.
  mutating func targets(
    except handed: ObjectIdentifier?
  ) -> (one: (any ContentListening)?, several: [ContentListener], handed: Bool) {
    if more.isEmpty {
      if firstID == 0 { return (nil, [], false) }
      if let handed, firstObject == handed { return (nil, [], true) }
      return (first.target, [], false)
    }
    var several = Array(more.values)
    if firstID != 0 { several.append(first) }
    return (nil, several, false)
  }

  mutating func add(_ listener: any ContentListening, id: UInt64) {
    if firstID == 0 {
      firstID = id
      first = ContentListener(target: listener)
      firstObject = ObjectIdentifier(listener)
    } else {
      more[id] = ContentListener(target: listener)
    }
  }

  /// Removes the listener `id` (a weak reference: nothing is released).
  mutating func remove(_ id: UInt64) {
    if firstID == id {
      firstID = 0
      first = ContentListener()
      firstObject = nil
    } else {
      more.removeValue(forKey: id)
    }
  }
}
