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
  /// A loadable reached twice is expanded once; a cycle is marked, not followed.
  public var dependencyTreeDescription: String { dependencyTree() }

  /// The tree of ``dependencyTreeDescription``, optionally without the load times (for output
  /// that must not change from run to run).
  public func dependencyTree(showingDurations: Bool = true) -> String {
    var lines: [String] = []
    var expanded: Set<ObjectIdentifier> = []
    describe(
      self, kind: nil, prefix: "", childPrefix: "", path: [], durations: showingDurations,
      expanded: &expanded, into: &lines)
    return lines.joined(separator: "\n")
  }
}

private func describe(
  _ node: any Loadable, kind: DependencyKind?, prefix: String, childPrefix: String,
  path: Set<ObjectIdentifier>, durations: Bool, expanded: inout Set<ObjectIdentifier>, into lines: inout [String]
) {
  let id = ObjectIdentifier(node)
  let info = (node as? any TreeDescribable)?.treeInfo
  var line = prefix + (info?.label ?? String(describing: type(of: node)))
  line += " [\(node.loadStatus)"
  if node.loadStatus == .failed, let error = node.loadError { line += ": \(error)" }
  if durations, node.loadStatus == .loaded, let duration = info?.duration { line += " \(format(duration))" }
  line += "]"
  if kind == .incidental { line += " (incidental)" }
  if path.contains(id) {
    lines.append(line + " (cycle)")
    return
  }
  let children = info?.children ?? []
  if !children.isEmpty && !expanded.insert(id).inserted {
    lines.append(line + " (see above)")
    return
  }
  lines.append(line)
  for (index, child) in children.enumerated() {
    let last = index == children.count - 1
    describe(
      child.loadable, kind: child.kind,
      prefix: childPrefix + (last ? "└─ " : "├─ "),
      childPrefix: childPrefix + (last ? "   " : "│  "),
      path: path.union([id]), durations: durations, expanded: &expanded, into: &lines)
  }
}

private func format(_ duration: Duration) -> String {
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
    let (name, duration) = state.withLock(owner: self) { ($0.extras?.settings?.name, $0.extras?.lastDuration) }
    return (name ?? String(describing: type(of: self)), duration, dependencies)
  }
}

protocol InnerSourceProviding {
  var innerLoadable: (any Loadable)? { get }
}

extension DerivedLoadable: InnerSourceProviding {
  var innerLoadable: (any Loadable)? { innerSource }
}
