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
/// synchronous, and a thread runs nothing else until it returns. (A task-local cost a push and a
/// pop, about 700 instructions, on each of a `map` node's three runs.)
enum Trampoline {
  static let maximumDepth = 32

  static func run(_ work: @escaping @Sendable () -> Void) {
    let depth = self.depth
    if depth < maximumDepth {
      self.depth = depth + 1
      defer { self.depth = depth }
      work()
    } else {
      // The new task runs from the bottom of a pool thread's stack, where the depth is 0.
      TaskLaunch.start { work() }
    }
  }

  /// How many `run`s are in progress on this thread, one inside the other.
  private static var depth: Int {
    get { Int(bitPattern: pthread_getspecific(key)) }
    set { pthread_setspecific(key, UnsafeRawPointer(bitPattern: newValue)) }
  }

  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
  }()
}
