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

  /// The attempts as a tree, children under the attempt that asked for them, in start order.
  /// An attempt that nobody's attempt asked for is a root.
  func lines() -> [String] {
    let all = entries.withLock { $0 }
    var children: [LoadAttempt.ID?: [Entry]] = [:]
    for entry in all.values {
      let parent = entry.attempt.parent.flatMap { all[$0] == nil ? nil : $0 }
      children[parent, default: []].append(entry)
    }
    for key in children.keys { children[key]!.sort { $0.attempt.startedAt < $1.attempt.startedAt } }
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

  private func describe(_ entry: Entry) -> String {
    let head = "\(entry.attempt.name) (\(entry.attempt.intent))"
    guard let end = entry.end else { return head + " still running" }
    let retries = end.retries > 0 ? ", \(end.retries) retries" : ""
    return "\(head) \(end.outcome) in \(formatDuration(end.duration))\(retries)"
  }
}
