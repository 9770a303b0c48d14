import Synchronization

/// How a dependent needs a dependency.
public enum DependencyKind: Sendable, Hashable {
  /// The dependent cannot load without it: it is loaded first, with the dependent's intent, and
  /// its failure fails the dependent with the same error.
  case required
  /// The dependent can do without it: it is started when the dependent loads, but not waited
  /// for, and its failure does not fail the dependent (a map with one broken layer still loads).
  case incidental
}

extension AsyncLoadable {
  /// Declares that this loadable depends on `dependency`.
  ///
  /// Every attempt of this loadable first loads its required dependencies concurrently, with the
  /// attempt's intent (a retry retries them, a refresh refreshes them), and starts its incidental
  /// ones without waiting. ``cancelLoad()`` cascades to required dependencies whose attempts this
  /// attempt started and that nobody else wants. Declare dependencies before loading; a
  /// dependency added while an attempt runs applies from the next attempt.
  ///
  /// The dependent holds its dependencies strongly (a map keeps its layers alive); a dependency
  /// does not hold its dependents. Two loadables that declare each other form a retain cycle as
  /// well as a dependency cycle: loading them fails with ``LoadableError/dependencyCycle``.
  ///
  /// ```swift
  /// layer.addDependency(featureTable)                     // the layer needs its table
  /// map.addDependency(layer, kind: .incidental)           // the map loads without it
  /// ```
  public func addDependency(_ dependency: any Loadable, kind: DependencyKind = .required) {
    let dependency = DeclaredDependency(dependency)  // told apart outside the lock
    withState { $0.more.dependencies.append((dependency, kind)) }
  }

  /// ``addDependency(_:kind:)`` for one of the library's loadables (a combinator's source): no
  /// cast to tell it apart.
  final func addDependency(node: any DependencyNode, kind: DependencyKind) {
    withState { $0.more.dependencies.append((.node(node), kind)) }
  }

  /// The declared dependencies, in the order they were added, including the parents that
  /// combinators record, followed by the loadable the last `flatMap` or `joined` transform
  /// returned, if any.
  public var dependencies: [(loadable: any Loadable, kind: DependencyKind)] {
    let declared = state.withLock(owner: self) { $0.extras?.dependencies ?? DeclaredDependencies() }
    var all = declared.map { (loadable: $0.dependency.loadable, kind: $0.kind) }
    if let inner = (self as? any InnerSourceProviding)?.innerLoadable { all.append((inner, .required)) }
    return all
  }

  /// Starts `dependency` with the intent of the attempt that is running, without waiting for it:
  /// an incidental dependency discovered inside ``performLoad()``.
  ///
  /// A map that learns its layers from its web map's content starts them this way, and loads
  /// whether or not they do. Outside an attempt it starts `dependency` as `load()` would.
  public final func startIncidentalDependency(_ dependency: any Loadable) {
    if let context = attemptContext(calledOn: self) {
      context.start(DeclaredDependency(dependency))
    } else if let node = dependency as? any DependencyNode {
      node.startAsIncidental(.load)
    } else {
      TaskLaunch.start { try? await dependency.load() }
    }
  }

  /// Loads `dependency` with the intent of the attempt that is running, and returns its content.
  ///
  /// Call it from ``performLoad()`` for dependencies you only discover while loading. During an
  /// attempt started by ``retryLoad()`` it retries a failed dependency; during a refresh it
  /// refreshes it; and each dependency receives the intent once per attempt (asking twice, or
  /// asking for a declared dependency, does not refresh it twice). Outside an attempt it loads
  /// `dependency` as `load()` does and returns its content.
  ///
  /// - Throws: the dependency's error, `CancellationError`, ``LoadableError/dependencyCycle``
  ///   when the dependency is waiting for this loadable, or ``LoadableError/noContent``.
  nonisolated(nonsending) public final func loadDependency<T: Sendable>(_ dependency: AsyncLoadable<T>) async throws -> T {
    let context = attemptContext(calledOn: self)
    let request = context?.request(for: dependency) ?? .load
    guard let content = try await dependency.request(request, from: context).content(as: T.self) else {
      throw LoadableError.noContent
    }
    return content
  }

  /// The attempt that a call on `loadable` belongs to: the one running on this task, when it is
  /// `loadable`'s, otherwise `loadable`'s running attempt (a call from a child task of
  /// ``performLoad()``), otherwise none.
  final func attemptContext(calledOn loadable: AnyObject) -> AttemptContext? {
    if let current = AttemptContext.current, current.owner === loadable { return current }
    return runningAttemptContext
  }

  /// Loads the declared dependencies: incidental ones are started, required ones awaited
  /// concurrently; the first failure cancels the others and fails the attempt.
  nonisolated(nonsending) final func loadDeclaredDependencies(
    _ declared: DeclaredDependencies, in context: AttemptContext
  ) async throws {
    // The common case, one dependency (a layer's table), is loaded here, not through `loadAll`'s
    // own case for one: no array is built, and the task's frames stay within the first slab of
    // its task allocator. (Through `loadAll`, even with the first element inline, the map graph's
    // tables each took a second slab again: +2.8 % instructions a load of the graph.)
    if declared.count == 1, let (dependency, kind) = declared.first {
      if kind == .incidental { return context.start(dependency) }
      return try await context.load(dependency)
    }
    var required: [DeclaredDependency] = []
    for (dependency, kind) in declared {
      if kind == .incidental {
        context.start(dependency)
      } else {
        required.append(dependency)
      }
    }
    try await context.loadAll(required)
  }
}
