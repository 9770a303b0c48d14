/// How an attempt loads its dependencies: one with the attempt's intent, several at once, or an
/// incidental one started without waiting.
extension AttemptContext {

  /// Loads one dependency with this attempt's intent.
  nonisolated(nonsending) func load(_ dependency: any Loadable) async throws {
    if let node = dependency as? any DependencyNode {
      _ = try await node.loadAsDependency(request(for: dependency), from: self)
    } else if intent == .retry {
      try await dependency.retryLoad()
    } else {
      try await dependency.load()
    }
  }

  /// Loads dependencies concurrently; the first failure cancels the rest and is rethrown.
  nonisolated(nonsending) func loadAll(_ dependencies: [any Loadable]) async throws {
    switch dependencies.count {
    case 0: return
    case 1: try await load(dependencies[0])
    default:
      // Loadables are awaited from this task, one waiter on each (no child task per dependency).
      let nodes = dependencies.compactMap { $0 as? any DependencyNode }
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
