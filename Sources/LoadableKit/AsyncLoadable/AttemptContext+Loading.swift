/// How an attempt loads its dependencies: one with the attempt's intent, several at once, or an
/// incidental one started without waiting.
extension AttemptContext {

  /// Loads one dependency with this attempt's intent.
  nonisolated(nonsending) func load(_ dependency: DeclaredDependency) async throws {
    switch dependency {
    case .node(let node):
      _ = try await node.loadAsDependency(request(for: node), from: self)
    case .other(let loadable):
      if intent == .retry { try await loadable.retryLoad() } else { try await loadable.load() }
    }
  }

  /// Loads dependencies concurrently; the first failure cancels the rest and is rethrown.
  nonisolated(nonsending) func loadAll(_ dependencies: [DeclaredDependency]) async throws {
    switch dependencies.count {
    case 0: return
    case 1: try await load(dependencies[0])
    default:
      // The library's loadables are awaited from this task, one waiter on each (no child task per
      // dependency).
      var nodes: [any DependencyNode] = []
      nodes.reserveCapacity(dependencies.count)
      for case .node(let node) in dependencies { nodes.append(node) }
      if nodes.count == dependencies.count { return try await DependencyGroup.loadAll(nodes, in: self) }
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
  func start(_ dependency: DeclaredDependency) {
    switch dependency {
    case .node(let node):
      node.startAsIncidental(request(for: node))
    case .other(let loadable):
      // Retried once an attempt, as a node is (``request(for:)``): the attempt's later tries (its
      // retry policy), or a second start, load it plainly.
      let retries = intent == .retry && state.withLock(owner: self) { $0.claim(ObjectIdentifier(loadable)) }
      TaskLaunch.start {
        if retries { try? await loadable.retryLoad() } else { try? await loadable.load() }
      }
    }
  }
}
