extension AsyncLoadable {
  /// A readable tree of this loadable and its dependencies, with each node's status, how long
  /// its last successful attempt took, and the error of a failed one.
  ///
  /// Use it to see which link of a slow or failing chain is to blame:
  ///
  /// ```
  /// map [loaded 212 ms]
  /// ├─ basemap [loaded 40 ms]
  /// ├─ parks [loaded 120 ms]
  /// │  └─ parks table [loaded 80 ms]
  /// └─ trails [failed: 404 Not Found] (incidental)
  /// ```
  ///
  /// Each node is shown by its ``displayName``. A loadable reached twice is expanded once; a
  /// cycle is marked, not followed.
  ///
  /// - Complexity: O(*n* + *e*) visits for *n* nodes and *e* edges, with an explicit stack, so a
  ///   chain ten thousand deep is described as safely as a short one (the text itself grows with
  ///   the depth, as every line is indented by its level).
  public var dependencyTreeDescription: String { dependencyTree() }

  /// The tree of ``dependencyTreeDescription``, optionally without the load times (for output
  /// that must not change from run to run).
  public func dependencyTree(showingDurations: Bool = true) -> String {
    DependencyTreeWriter(showingDurations: showingDurations).describe(self)
  }
}

/// Writes the dependency tree depth-first with an explicit stack: no recursion as deep as the graph.
struct DependencyTreeWriter {
  let showingDurations: Bool

  private enum Step {
    /// Describe `node` at this position of the tree.
    case visit(node: any Loadable, kind: DependencyKind?, prefix: String, childPrefix: String)
    /// Every child of the node has been described: it leaves the current path.
    case leave(ObjectIdentifier)
  }

  func describe(_ root: any Loadable) -> String {
    var lines: [String] = []
    var expanded: Set<ObjectIdentifier> = []
    var onPath: Set<ObjectIdentifier> = []
    var stack: [Step] = [.visit(node: root, kind: nil, prefix: "", childPrefix: "")]
    while let step = stack.popLast() {
      switch step {
      case .leave(let id):
        onPath.remove(id)
      case .visit(let node, let kind, let prefix, let childPrefix):
        let id = ObjectIdentifier(node)
        let info = (node as? any TreeDescribable)?.treeInfo
        var line = prefix + (info?.label ?? LoadableNames.typeName(of: node)) + " " + status(of: node, info?.duration)
        if kind == .incidental { line += " (incidental)" }
        if onPath.contains(id) {
          lines.append(line + " (cycle)")
          continue
        }
        let children = info?.children ?? []
        if !children.isEmpty && !expanded.insert(id).inserted {
          lines.append(line + " (see above)")
          continue
        }
        lines.append(line)
        guard !children.isEmpty else { continue }
        onPath.insert(id)
        stack.append(.leave(id))
        // Pushed in reverse, so that the first child is described first.
        for (index, child) in children.enumerated().reversed() {
          let last = index == children.count - 1
          stack.append(
            .visit(
              node: child.loadable, kind: child.kind,
              prefix: childPrefix + (last ? "└─ " : "├─ "),
              childPrefix: childPrefix + (last ? "   " : "│  ")))
        }
      }
    }
    return lines.joined(separator: "\n")
  }

  private func status(of node: any Loadable, _ duration: Duration?) -> String {
    let status = node.loadStatus
    var text = "[\(status)"
    if status == .failed, let error = node.loadError { text += ": \(error)" }
    if showingDurations, status == .loaded, let duration { text += " \(format(duration))" }
    return text + "]"
  }
}

/// A duration as milliseconds, with one decimal below 10 ms: `"212 ms"`, `"4.5 ms"`.
func format(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
  if milliseconds >= 10 { return "\(Int(milliseconds.rounded())) ms" }
  return "\(Double(Int((milliseconds * 10).rounded())) / 10) ms"
}

protocol TreeDescribable {
  var treeInfo: (label: String, duration: Duration?, children: [(loadable: any Loadable, kind: DependencyKind)]) { get }
}

extension AsyncLoadable: TreeDescribable {
  var treeInfo: (label: String, duration: Duration?, children: [(loadable: any Loadable, kind: DependencyKind)]) {
    let duration = state.withLock(owner: self) { $0.lastDuration }.map { Duration.nanoseconds($0) }
    let extras = treeExtras
    return (displayName, duration, extras.isEmpty ? dependencies : dependencies + extras)
  }
}

protocol InnerSourceProviding {
  var innerLoadable: (any Loadable)? { get }
}

extension DerivedLoadable: InnerSourceProviding {
  var innerLoadable: (any Loadable)? { innerSource }
}
