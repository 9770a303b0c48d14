/// Runs work that may recurse through other loadables (cancel cascades, live `map` updates)
/// inline while the recursion is shallow, and on a new task past a fixed depth, so that a chain
/// of ten thousand loadables cannot overflow the stack.
enum Trampoline {
  @TaskLocal static var depth = 0
  static let maximumDepth = 32

  static func run(_ work: @escaping @Sendable () -> Void) {
    let depth = Self.depth
    if depth < maximumDepth {
      $depth.withValue(depth + 1) { work() }
    } else {
      TaskLaunch.start { $depth.withValue(0) { work() } }
    }
  }
}
