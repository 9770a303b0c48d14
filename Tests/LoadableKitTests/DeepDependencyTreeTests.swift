import LoadableKit
import Testing

/// The tree dump walks the graph with an explicit stack, never recursion as deep as the graph
/// (issue 12, defect 7).
@Suite struct DeepDependencyTreeTests {
  /// A 10,000-deep `map` chain: the recursive dump overflowed the stack at ~4,450 frames (SIGSEGV).
  /// Run in isolation with `--filter DeepDependencyTreeTests`: on the recursive dump it kills the process.
  @Test func dumpOfATenThousandDeepMapChainDoesNotOverflowTheStack() async throws {
    let depth = 10_000
    let root = AsyncLoadable { 1 }.named("root")
    var chain = root
    for _ in 0..<depth { chain = chain.map { $0 + 1 } }
    let text = chain.dependencyTreeDescription
    let lines = text.utf8.split(separator: UInt8(ascii: "\n"))
    #expect(lines.count == depth + 1)
    #expect(text.hasSuffix("root [notLoaded]"))
    // Each level indents by three columns.
    #expect(String(lines.last!)?.hasPrefix(String(repeating: " ", count: 3 * (depth - 1)) + "└─ ") == true)
  }

  /// The iterative walk prints exactly what the recursive one did: order, prefixes, shared nodes
  /// expanded once, and cycles marked.
  @Test func iterativeDumpKeepsTheLayout() async throws {
    let shared = AsyncLoadable { "shared" }.named("shared")
    let left = AsyncLoadable { "left" }.named("left")
    left.addDependency(shared)
    let right = AsyncLoadable { "right" }.named("right")
    right.addDependency(shared)
    let top = AsyncLoadable { "top" }.named("top")
    top.addDependency(left)
    top.addDependency(right, kind: .incidental)
    let a = AsyncLoadable { 1 }.named("a")
    let b = AsyncLoadable { 2 }.named("b")
    a.addDependency(b)
    b.addDependency(a)
    top.addDependency(a)
    #expect(top.dependencyTree(showingDurations: false) == """
      top [notLoaded]
      ├─ left [notLoaded]
      │  └─ shared [notLoaded]
      ├─ right [notLoaded] (incidental)
      │  └─ shared [notLoaded]
      └─ a [notLoaded]
         └─ b [notLoaded]
            └─ a [notLoaded] (cycle)
      """)
  }
}
