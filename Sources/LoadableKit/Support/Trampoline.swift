#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs work that may recurse through other loadables (cancel cascades, live `map` updates, a
/// `map` chain's attempts starting and ending) inline while the recursion is shallow, and on a new
/// task past a fixed depth, so that a chain of ten thousand loadables cannot overflow the stack.
///
/// The depth is the nesting of `run` on this thread's stack, so it is kept per thread: the work is
/// synchronous, and what it runs inline (a cancellation handler, a listener) runs on the same
/// stack and counts. A new task starts from its executor's loop, at depth 0 (an executor that ran
/// jobs inside `enqueue` would defeat any trampoline). A task-local cost a push and a pop, about
/// 700 instructions, on each of a `map` node's three runs, and was inherited by tasks started
/// inside the work.
enum Trampoline {
  static let maximumDepth = 32

  static func run(_ work: @escaping @Sendable () -> Void) {
    if !runHere(work) { onNewTask(work) }
  }

  /// Runs `work` on a new task, which starts from its executor's loop, where the depth is 0. (It
  /// is not reset there: a task that did start on a deep stack, run by hand from inside a
  /// listener, is counted from that stack's depth, as it should be.) Not inlined: the asynchronous
  /// thunk around `work` would otherwise be allocated before the depth is checked, on every `run`.
  @inline(never)
  static func onNewTask(_ work: @escaping @Sendable () -> Void) {
    TaskLaunch.start(work)
  }

  /// Runs `work` here and returns `true` if the depth allows it; otherwise returns `false`, and
  /// the caller starts a task for it. For the steps of a `map` chain, whose work is a local
  /// function: passed here it is not an escaping closure, so nothing is allocated for it unless
  /// it goes on a task.
  @inline(__always)
  static func runHere(_ work: () -> Void) -> Bool {
    let depth = self.depth
    guard depth.pointee < maximumDepth else { return false }
    depth.pointee += 1
    defer { depth.pointee -= 1 }
    work()
    return true
  }

  /// How many `run`s are in progress on this thread, one inside the other: a counter allocated
  /// once per thread, so that a run reads the thread-specific pointer once and sets nothing.
  private static var depth: UnsafeMutablePointer<Int> {
    if let pointer = pthread_getspecific(key) { return pointer.assumingMemoryBound(to: Int.self) }
    let depth = UnsafeMutablePointer<Int>.allocate(capacity: 1)
    depth.initialize(to: 0)
    pthread_setspecific(key, depth)
    return depth
  }

  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    #if canImport(Darwin)
      pthread_key_create(&key) { $0.assumingMemoryBound(to: Int.self).deallocate() }
    #else
      pthread_key_create(&key) { pointer in pointer?.assumingMemoryBound(to: Int.self).deallocate() }
    #endif
    return key
  }()
}
