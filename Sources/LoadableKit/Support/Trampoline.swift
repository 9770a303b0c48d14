#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs work that may recurse through other loadables (cancel cascades, live `map` updates, a
/// `map` chain's attempts starting and ending) inline while the recursion is shallow, and from the
/// bottom of the stack past a fixed depth, so that a chain of ten thousand loadables cannot
/// overflow the stack.
///
/// The depth is the nesting of `run` on this thread's stack, so it is kept per thread: the work is
/// synchronous, and what it runs inline (a cancellation handler, a listener) runs on the same
/// stack and counts. Work that would go deeper than ``maximumDepth`` is queued on the thread, and
/// the outermost `run` on it (there is one: the depth counts the runs under way) runs the queue,
/// first in first out, once its own work has returned, each at depth 1. So a chain runs on the
/// thread that started it, 32 levels at a time, as the classic trampoline does: until issue 13
/// the work past the limit went on a new task, and a `map` chain of 1,000 nodes hopped threads
/// about sixty times (0.24 µs a node of its 1.67).
///
/// What is queued runs in the outermost run's frame, after the work it nested, but before that
/// `run` returns: nothing that runs inside a `run` (the library's steps, and the listeners,
/// observers and handlers they call) may block its thread waiting for other work of the library.
enum Trampoline {
  static let maximumDepth = 32

  static func run(_ work: @escaping @Sendable () -> Void) {
    if !runHere(work) { later(work) }
  }

  /// Queues `work`, which was past the depth limit, for the outermost run on this thread. Not
  /// inlined: callers pass a local function, which becomes an escaping closure (an allocation)
  /// only here.
  @inline(never)
  static func later(_ work: @escaping () -> Void) {
    thread.queue.append(work)
  }

  /// Runs `work` here and returns `true` if the depth allows it; otherwise returns `false`, and
  /// the caller queues it (``later(_:)``). For the steps of a `map` chain, whose work is a local
  /// function: passed here it is not an escaping closure, so nothing is allocated for it unless
  /// it is queued. The outermost run then runs the queue.
  @inline(__always)
  static func runHere(_ work: () -> Void) -> Bool {
    let thread = self.thread
    let depth = thread.depth
    guard depth < maximumDepth else { return false }
    thread.depth = depth + 1
    work()
    if depth == 0 && !thread.queue.isEmpty { thread.drain() }
    thread.depth = depth
    return true
  }

  /// One thread's depth and queue. Only its own thread touches it: no dynamic exclusivity checks.
  final class ThreadState {
    @exclusivity(unchecked) var depth = 0
    @exclusivity(unchecked) var queue: [() -> Void] = []

    /// Runs the queue at depth 1 (the outermost run's), including what the queued work queues.
    /// The run items are dropped as it goes, so the queue holds what waits, not what ran.
    @inline(never)
    func drain() {
      var next = 0
      while next < queue.count {
        let work = queue[next]
        next += 1
        if next >= 64 && next * 2 >= queue.count {
          queue.removeFirst(next)
          next = 0
        }
        work()
      }
      queue = []
    }
  }

  /// This thread's state, made on first use and released with the thread.
  private static var thread: ThreadState {
    if let pointer = pthread_getspecific(key) {
      return Unmanaged<ThreadState>.fromOpaque(pointer).takeUnretainedValue()
    }
    let state = ThreadState()
    pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
    return state
  }

  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    #if canImport(Darwin)
      pthread_key_create(&key) { Unmanaged<ThreadState>.fromOpaque($0).release() }
    #else
      pthread_key_create(&key) { pointer in
        if let pointer { Unmanaged<ThreadState>.fromOpaque(pointer).release() }
      }
    #endif
    return key
  }()
}
