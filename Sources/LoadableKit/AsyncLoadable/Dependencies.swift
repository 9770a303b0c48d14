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
    state.withLock(owner: self) { $0.more.dependencies.append((dependency, kind)) }
  }

  /// The declared dependencies, in the order they were added, including the parents that
  /// combinators record, followed by the loadable the last `flatMap` or `joined` transform
  /// returned, if any.
  public var dependencies: [(loadable: any Loadable, kind: DependencyKind)] {
    var all = state.withLock(owner: self) { $0.extras?.dependencies ?? [] }
    if let inner = (self as? any InnerSourceProviding)?.innerLoadable { all.append((inner, .required)) }
    return all
  }

  /// Starts `dependency` with the intent of the attempt that is running, without waiting for it:
  /// an incidental dependency discovered inside ``performLoad()``.
  ///
  /// A map that learns its layers from its web map's content starts them this way, and loads
  /// whether or not they do. Outside an attempt it starts `dependency` as `load()` would.
  public final func startIncidentalDependency(_ dependency: any Loadable) {
    if let context = AttemptContext.current {
      context.start(dependency)
    } else {
      AttemptContext(owner: self, intent: .load).start(dependency)
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
    let request = AttemptContext.current?.request(for: dependency) ?? .load
    guard let content = try await dependency.request(request).content else { throw LoadableError.noContent }
    return content
  }

  /// Loads the declared dependencies: incidental ones are started, required ones awaited
  /// concurrently; the first failure cancels the others and fails the attempt.
  final func loadDeclaredDependencies(in context: AttemptContext) async throws {
    let declared = state.withLock(owner: self) { $0.extras?.dependencies ?? [] }
    guard !declared.isEmpty else { return }
    var required: [any Loadable] = []
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

/// The running attempt of a loadable, visible through a task-local to everything it calls.
final class AttemptContext: Sendable {
  @TaskLocal static var current: AttemptContext?

  /// Runs `body` outside any attempt: user code that the library calls back (observers,
  /// completion handlers, listeners) and the tasks it starts must not pass for part of the
  /// attempt that happened to trigger them, or their loads would count as that attempt's
  /// dependencies (and could be reported as cycles).
  static func outside<R>(_ body: () throws -> R) rethrows -> R {
    current == nil ? try body() : try $current.withValue(nil, operation: body)
  }

  let owner: AnyObject & Sendable
  let intent: LoadIntent
  /// The running attempt's identifier (0 outside an attempt), the parent of the attempts it asks for.
  let attemptID: UInt64
  /// Reports the attempt's retries when an instrument is installed.
  let probe: AttemptProbe?
  /// Dependencies that already received this attempt's intent.
  private let claimed = Mutex<Set<ObjectIdentifier>>([])

  init(owner: AnyObject & Sendable, intent: LoadIntent, attemptID: UInt64 = 0, probe: AttemptProbe? = nil) {
    self.owner = owner
    self.intent = intent
    self.attemptID = attemptID
    self.probe = probe
  }

  /// The request for `dependency`: the attempt's intent the first time, a plain load after that.
  func request(for dependency: AnyObject) -> LoadRequest {
    let first = claimed.withLock(owner: self) { $0.insert(ObjectIdentifier(dependency)).inserted }
    return first ? intent.dependencyRequest : .load
  }

  /// Loads one dependency with this attempt's intent.
  func load(_ dependency: any Loadable) async throws {
    if let node = dependency as? any DependencyNode {
      try await node.loadAsDependency(request(for: dependency))
    } else if intent == .retry {
      try await dependency.retryLoad()
    } else {
      try await dependency.load()
    }
  }

  /// Loads dependencies concurrently; the first failure cancels the rest and is rethrown.
  func loadAll(_ dependencies: [any Loadable]) async throws {
    switch dependencies.count {
    case 0: return
    case 1: try await load(dependencies[0])
    default:
      try await withThrowingTaskGroup(of: Void.self) { group in
        for dependency in dependencies {
          group.addTask { try await self.load(dependency) }
        }
        do {
          for try await _ in group {}
        } catch {
          group.cancelAll()
          throw error
        }
      }
    }
  }

  /// Starts an incidental dependency with this attempt's intent, without waiting for it.
  func start(_ dependency: any Loadable) {
    if let node = dependency as? any DependencyNode {
      node.startAsIncidental(request(for: dependency))
    } else {
      let intent = intent
      TaskLaunch.start {
        if intent == .retry { try? await dependency.retryLoad() } else { try? await dependency.load() }
      }
    }
  }
}

/// What the dependency machinery needs of an ``AsyncLoadable`` whose content type it cannot name.
protocol DependencyNode: Loadable {
  func loadAsDependency(_ request: LoadRequest) async throws
  func startAsIncidental(_ request: LoadRequest)
  /// Loads with `request` and returns the content, type-erased, with its version.
  func loadErased(_ request: LoadRequest) async throws -> (content: any Sendable, version: UInt64)
  /// Status, content and version in one read.
  var erasedState: (status: LoadStatus, content: (any Sendable)?, error: (any Error)?, version: UInt64) { get }
  func addContentListener(_ listener: @escaping @Sendable () -> Void) -> UInt64
  func removeContentListener(_ id: UInt64)
}

extension AsyncLoadable: DependencyNode {
  func loadAsDependency(_ request: LoadRequest) async throws {
    _ = try await self.request(request)
  }

  func loadErased(_ request: LoadRequest) async throws -> (content: any Sendable, version: UInt64) {
    let delivery = try await self.request(request)
    guard let content = delivery.content else { throw LoadableError.noContent }
    return (content, delivery.version)
  }

  var erasedState: (status: LoadStatus, content: (any Sendable)?, error: (any Error)?, version: UInt64) {
    state.withLock(owner: self) { ($0.status, $0.content, $0.error, $0.contentVersion) }
  }

  func startAsIncidental(_ request: LoadRequest) {
    // A completion waiter marks the attempt as wanted, so a cascading cancel leaves it alone.
    submit(request, completion: { _ in })
  }
}

/// Who waits for whom, across all loadables, so that a cycle fails instead of hanging.
///
/// An edge `a → b` exists while an attempt of `a` waits for `b`. Adding an edge that closes a
/// path back to its source throws ``LoadableError/dependencyCycle``.
enum WaitGraph {
  struct Edge {
    let from: ObjectIdentifier
    let to: ObjectIdentifier
  }

  private static let edges = Mutex<[ObjectIdentifier: [ObjectIdentifier: Int]]>([:])
  private static let lockOwner = LockOwner()
  private final class LockOwner: Sendable {}

  static func enter(from: AnyObject, to: AnyObject) throws -> Edge {
    let edge = Edge(from: ObjectIdentifier(from), to: ObjectIdentifier(to))
    let cycle = edges.withLock(owner: lockOwner) { edges -> Bool in
      if reaches(edge.to, edge.from, in: edges) { return true }
      edges[edge.from, default: [:]][edge.to, default: 0] += 1
      return false
    }
    if cycle {
      throw LoadableError(
        code: .dependencyCycle,
        message: "\(LoadableNames.name(of: from)) waits for \(LoadableNames.name(of: to)), which is already waiting for it")
    }
    return edge
  }

  static func leave(_ edge: Edge) {
    edges.withLock(owner: lockOwner) { edges in
      guard let count = edges[edge.from]?[edge.to] else { return }
      if count > 1 {
        edges[edge.from]![edge.to] = count - 1
      } else {
        edges[edge.from]![edge.to] = nil
        if edges[edge.from]!.isEmpty { edges[edge.from] = nil }
      }
    }
  }

  private static func reaches(
    _ start: ObjectIdentifier, _ target: ObjectIdentifier, in edges: [ObjectIdentifier: [ObjectIdentifier: Int]]
  ) -> Bool {
    if start == target { return true }
    var seen: Set<ObjectIdentifier> = [start]
    var stack = [start]
    while let node = stack.popLast() {
      for next in edges[node]?.keys ?? [:].keys {
        if next == target { return true }
        if seen.insert(next).inserted { stack.append(next) }
      }
    }
    return false
  }
}
