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
/// It runs as it would have run in place: inside as many ``AttemptContext/outside(on:_:)`` blocks,
/// and as part of an attempt's end or not (``AttemptContext/isEndingOnAttemptTask``), as where it
/// was queued. So a cancel queued by the cancel phase, which runs as user code, runs its task's
/// cancellation handlers as user code too, wherever the outermost run is.
enum Trampoline {
  static let maximumDepth = 32

  /// Work queued past the depth, with the thread's counts of where it was queued.
  struct Queued {
    let work: () -> Void
    let outsideDepth: Int
    let attemptTaskDepth: Int
  }

  static func run(_ work: @escaping @Sendable () -> Void) {
    if !runHere(work) { later(work) }
  }

  /// Queues `work`, which was past the depth limit, for the outermost run on this thread. Not
  /// inlined: callers pass a local function, which becomes an escaping closure (an allocation)
  /// only here.
  @inline(never)
  static func later(_ work: @escaping () -> Void) {
    let thread = PerThread.current
    thread.pointee.trampolineQueue.append(
      Queued(work: work, outsideDepth: thread.pointee.outsideDepth, attemptTaskDepth: thread.pointee.attemptTaskDepth))
  }

  /// Runs `work` here and returns `true` if the depth allows it; otherwise returns `false`, and
  /// the caller queues it (``later(_:)``). For the steps of a `map` chain, whose work is a local
  /// function: passed here it is not an escaping closure, so nothing is allocated for it unless
  /// it is queued. The outermost run then runs the queue.
  @inline(__always)
  static func runHere(_ work: () -> Void) -> Bool {
    let thread = PerThread.current
    let depth = thread.pointee.trampolineDepth
    guard depth < maximumDepth else { return false }
    thread.pointee.trampolineDepth = depth + 1
    work()
    if depth == 0 && !thread.pointee.trampolineQueue.isEmpty { drain(thread) }
    thread.pointee.trampolineDepth = depth
    return true
  }

  /// Runs the queue at depth 1 (the outermost run's), including what the queued work queues.
  ///
  /// The queue is taken a batch at a time and each batch dropped in a local variable, before the
  /// queue is looked at again: dropping the work that ran may release the last reference to
  /// something whose `deinit` (user code) starts a cascade, whose steps past the depth are queued
  /// then; they run in the next batch. Dropped while the queue itself was being changed, they
  /// would have been stranded, or have changed the queue inside its own change.
  @inline(never)
  private static func drain(_ thread: UnsafeMutablePointer<PerThread>) {
    let (outsideDepth, attemptTaskDepth) = (thread.pointee.outsideDepth, thread.pointee.attemptTaskDepth)
    while !thread.pointee.trampolineQueue.isEmpty {
      var batch: [Queued] = []
      swap(&batch, &thread.pointee.trampolineQueue)
      for queued in batch {
        thread.pointee.outsideDepth = queued.outsideDepth
        thread.pointee.attemptTaskDepth = queued.attemptTaskDepth
        queued.work()
      }
      (thread.pointee.outsideDepth, thread.pointee.attemptTaskDepth) = (outsideDepth, attemptTaskDepth)
      // What the work held is let go of as user code (a `deinit` is).
      AttemptContext.releasingAsCallbacks(consume batch, on: thread)
    }
  }
}
