import LoadableKit
import LoadableKitTesting
import Testing

/// The tree dump walks the graph with an explicit stack, never recursion as deep as the graph
/// (issue 12, defect 7).
@Suite(.timeLimit(.minutes(1))) struct DeepDependencyTreeTests {
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

/// The load times the tree shows are the attempts' own, read from the monotonic clock.
@Suite(.timeLimit(.minutes(1))) struct DependencyTreeDurationTests {
  /// The source's attempt is held for at least 20 ms of the test's own clock, so the tree must
  /// show between 20 ms and the whole time the test took (a wrong unit or a wrong start would be
  /// off by orders of magnitude); the `map` over it ran no longer than the whole.
  @Test func aLoadedNodeShowsHowLongItsLastAttemptTook() async throws {
    let held = ControlledLoad<Int>()
    let source = held.makeLoadable().named("source")
    let top = source.map { $0 + 1 }.named("top")
    let before = ContinuousClock.now
    let loading = Task { try await top.load() }
    try await held.waitForStart()
    // The attempt started before this (its start is read before its load runs): held from here
    // for 20 ms, it lasted at least that. (Counted from `before`, which comes earlier, it could
    // last less: 19 ms once, under ThreadSanitizer.) A bounded spin, not a sleep.
    let started = ContinuousClock.now
    while started.duration(to: .now) < .milliseconds(20) { await Task.yield() }
    #expect(held.resolve(41))
    try await loading.value
    let elapsed = before.duration(to: .now)
    let tree = top.dependencyTree()
    let lines = tree.split(separator: "\n").map(String.init)
    #expect(lines.count == 2)
    func milliseconds(_ line: String) -> Double? {
      guard let open = line.firstIndex(of: "["), line.hasSuffix(" ms]") else { return nil }
      let text = line[open...].dropFirst("[loaded ".count).dropLast(" ms]".count)
      return Double(text)
    }
    let sourceTime = try #require(milliseconds(lines[1]), "\(tree)")
    let topTime = try #require(milliseconds(lines[0]), "\(tree)")
    let elapsedMilliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    #expect(sourceTime >= 20 && sourceTime <= elapsedMilliseconds + 1, "\(tree), \(elapsed)")
    #expect(topTime >= sourceTime - 1 && topTime <= elapsedMilliseconds + 1, "\(tree), \(elapsed)")
    #expect(top.dependencyTree(showingDurations: false) == "top [loaded]\n└─ source [loaded]")
  }
}
