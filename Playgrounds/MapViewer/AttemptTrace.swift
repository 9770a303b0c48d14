import ExampleServices
import LoadableKit

/// A `LoadInstrument` that keeps every attempt it hears of, and prints them as the tree of who
/// asked for whom, with outcomes and durations.
///
/// The Integrations package turns the same reports into swift-distributed-tracing spans; the
/// playground stays in the dependency-free root package, so it reads the hook directly.
final class AttemptTrace: LoadInstrument {
  private struct Entry {
    var attempt: LoadAttempt
    var end: LoadAttempt.End?
  }

  private let entries = Locked<[LoadAttempt.ID: Entry]>([:])

  func attemptStarted(_ attempt: LoadAttempt) {
    entries.withLock { $0[attempt.id] = Entry(attempt: attempt) }
  }

  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
    entries.withLock { $0[attempt.id]?.end = end }
  }

  /// The attempts as a tree, children under the attempt that asked for them; an attempt that
  /// nobody's attempt asked for is a root.
  ///
  /// So that the tree is the same on every run, it follows `graph`, the dependency graph of the
  /// loadables the attempts belong to: siblings in the graph's order (depth first, dependencies
  /// in the order they were declared), and an attempt that several dependents asked for — the
  /// shared portal — under the first of those dependents in that order, whichever asked first
  /// (the instrument's parent link names the first that asked, and that is a race).
  func lines(following graph: some Loadable) -> [String] {
    let (rank, dependents) = Self.order(of: graph)
    let all = entries.withLock { $0 }
    func root(of id: LoadAttempt.ID) -> LoadAttempt.ID {
      var id = id
      while let parent = all[id]?.attempt.parent, all[parent] != nil { id = parent }
      return id
    }
    func rankOf(_ entry: Entry) -> Int { rank[entry.attempt.name] ?? .max }
    var children: [LoadAttempt.ID?: [Entry]] = [:]
    for entry in all.values {
      var parent = entry.attempt.parent.flatMap { all[$0] == nil ? nil : $0 }
      let askers = dependents[entry.attempt.name] ?? []
      // Whether the other dependents joined this attempt or came after it had failed (and got the
      // failure at once, a sticky failure starting nothing) is a race too: go by the graph alone.
      if let asked = parent, askers.count > 1 {
        let tree = root(of: asked)
        let first = all.values.filter { askers.contains($0.attempt.name) && root(of: $0.attempt.id) == tree }
          .min { (rankOf($0), $0.attempt.startedAt) < (rankOf($1), $1.attempt.startedAt) }
        parent = first?.attempt.id ?? asked
      }
      children[parent, default: []].append(entry)
    }
    for key in children.keys {
      children[key]!.sort { (rankOf($0), $0.attempt.startedAt) < (rankOf($1), $1.attempt.startedAt) }
    }
    var lines: [String] = []
    // Depth-first with an explicit stack: (entry, prefix of its line, prefix of its children's).
    var stack: [(Entry, String, String)] = (children[nil] ?? []).reversed().map { ($0, "", "") }
    while let (entry, prefix, childPrefix) = stack.popLast() {
      lines.append(prefix + describe(entry))
      let below = children[entry.attempt.id] ?? []
      for (index, child) in below.enumerated().reversed() {
        let last = index == below.count - 1
        stack.append((child, childPrefix + (last ? "└─ " : "├─ "), childPrefix + (last ? "   " : "│  ")))
      }
    }
    return lines
  }

  /// The position of each loadable's name in `graph`, depth first (with an explicit stack), and
  /// the names of the dependents of each, in that order.
  private static func order(of graph: some Loadable) -> (rank: [String: Int], dependents: [String: [String]]) {
    var rank: [String: Int] = [:]
    var dependents: [String: [String]] = [:]
    var stack: [any Loadable] = [graph]
    while let loadable = stack.popLast() {
      guard let node = loadable as? any GraphNode, rank[node.displayName] == nil else { continue }
      rank[node.displayName] = rank.count
      let below = node.dependencies.compactMap { $0.loadable as? any GraphNode }
      for dependency in below where !(dependents[dependency.displayName] ?? []).contains(node.displayName) {
        dependents[dependency.displayName, default: []].append(node.displayName)
      }
      stack += below.reversed().map { $0 as any Loadable }
    }
    return (rank, dependents)
  }

  private func describe(_ entry: Entry) -> String {
    let head = "\(entry.attempt.name) (\(entry.attempt.intent))"
    guard let end = entry.end else { return head + " still running" }
    let retries = end.retries > 0 ? ", \(end.retries) retries" : ""
    return "\(head) \(end.outcome) in \(formatDuration(end.duration))\(retries)"
  }
}

/// A loadable whose name and dependencies the trace can read.
protocol GraphNode: Loadable {
  var displayName: String { get }
  var dependencies: [(loadable: any Loadable, kind: DependencyKind)] { get }
}

extension AsyncLoadable: GraphNode {}
