import LoadableKit

/// Records the status changes of loadables and prints them as a tree, one line per loadable.
///
/// Status changes of *one* loadable arrive in order (`observeLoadStatus` guarantees it), but
/// loadables that load concurrently interleave differently on every run. So the trace is not a
/// single interleaved log: each loadable gets its own line with the statuses it went through since
/// the last print, and the lines are laid out along the dependency tree, which shows who waits
/// for whom. The output is the same on every run.
///
/// ```
/// map                      notLoaded → loading → loaded
/// ├─ basemap               notLoaded → loading → loaded
/// └─ Trails (incidental)   notLoaded → loading → failed   404 Not Found
/// ```
public final class StatusTrace: Sendable {
  private struct Record: Sendable {
    var node: any TraceNode
    var statuses: [LoadStatus] = []
    var observation: LoadObservation?
  }

  private let records = Locked<[ObjectIdentifier: Record]>([:])

  public init() {}

  /// Starts recording `loadable` and, recursively, every dependency it has declared.
  ///
  /// Call it before loading so the trace starts at the first status. Calling it again after
  /// dependencies were added records the new ones; loadables already recorded are skipped.
  public func watch(_ loadable: any Loadable) {
    guard let node = loadable as? any TraceNode else { return }
    let id = ObjectIdentifier(node)
    let isNew = records.withLock { records in
      guard records[id] == nil else { return false }
      records[id] = Record(node: node)
      return true
    }
    if isNew {
      // The handler gets the current status at once, then every change, in order.
      let observation = node.observeStatus { [weak self] status in
        self?.records.withLock { $0[id]?.statuses.append(status) }
      }
      records.withLock { $0[id]?.observation = observation }
    }
    for dependency in node.traceDependencies {
      watch(dependency.loadable)
    }
  }

  /// Prints the trees of `roots`, aligned together, with each loadable's statuses since the
  /// last print.
  public func print(_ roots: any Loadable..., indent: String = "    ") async {
    for line in await lines(roots) {
      Swift.print(indent + line)
    }
  }

  /// The lines ``print(_:indent:)`` prints.
  ///
  /// It first waits until every recorded loadable's last recorded status is its current status:
  /// `await loadable.load()` returns as soon as the attempt ends, which can be a moment before the
  /// observers hear of the new status.
  public func lines(_ roots: [any Loadable]) async -> [String] {
    await settle()
    var rows: [(label: String, trace: String, detail: String)] = []
    var printed: Set<ObjectIdentifier> = []
    for root in roots {
      collect(root, kind: nil, prefix: "", childPrefix: "", printed: &printed, into: &rows)
    }
    let labelWidth = rows.map(\.label.count).max() ?? 0
    let traceWidth = rows.filter { !$0.detail.isEmpty }.map(\.trace.count).max() ?? 0
    return rows.map { row in
      var line = row.label.padded(to: labelWidth + 3) + row.trace
      if !row.detail.isEmpty { line = line.padded(to: labelWidth + 3 + traceWidth + 3) + row.detail }
      return line.trimmingTrailingSpaces()
    }
  }

  private func collect(
    _ loadable: any Loadable, kind: DependencyKind?, prefix: String, childPrefix: String,
    printed: inout Set<ObjectIdentifier>, into rows: inout [(label: String, trace: String, detail: String)]
  ) {
    guard let node = loadable as? any TraceNode else { return }
    let id = ObjectIdentifier(node)
    let label = prefix + node.traceName + (kind == .incidental ? " (incidental)" : "")
    guard printed.insert(id).inserted else {
      rows.append((label, "(see above)", ""))
      return
    }
    let statuses = records.withLock { records -> [LoadStatus] in
      guard let record = records[id] else { return [] }
      if let last = record.statuses.last { records[id]!.statuses = [last] }
      return record.statuses
    }
    let trace = statuses.isEmpty ? "\(node.loadStatus) (not watched)" : statuses.map(\.description).joined(separator: " → ")
    let detail = node.loadStatus == .failed ? describe(node.loadError) : ""
    rows.append((label, trace, detail))
    let children = node.traceDependencies
    for (index, child) in children.enumerated() {
      let last = index == children.count - 1
      collect(
        child.loadable, kind: child.kind,
        prefix: childPrefix + (last ? "└─ " : "├─ "),
        childPrefix: childPrefix + (last ? "   " : "│  "),
        printed: &printed, into: &rows)
    }
  }

  private func settle() async {
    for _ in 0..<10_000 {
      let records = self.records.withLock { Array($0.values) }
      if records.allSatisfy({ $0.statuses.last == $0.node.loadStatus }) { return }
      try? await Task.sleep(for: .milliseconds(1))
    }
  }
}

/// What the trace needs of an `AsyncLoadable` whose content type it does not know.
protocol TraceNode: Loadable {
  var traceName: String { get }
  var traceDependencies: [(loadable: any Loadable, kind: DependencyKind)] { get }
  func observeStatus(_ handler: @escaping @Sendable (LoadStatus) -> Void) -> LoadObservation
}

extension AsyncLoadable: TraceNode {
  var traceName: String { name ?? "\(type(of: self))" }
  var traceDependencies: [(loadable: any Loadable, kind: DependencyKind)] { dependencies }
  func observeStatus(_ handler: @escaping @Sendable (LoadStatus) -> Void) -> LoadObservation {
    observeLoadStatus(handler)
  }
}
