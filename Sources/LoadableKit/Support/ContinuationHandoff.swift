import Synchronization

/// A continuation's handoff, made visible to ThreadSanitizer.
///
/// A continuation can be resumed before its task suspends: a waiter is stored under a lock inside
/// the `withUnsafeContinuation` closure, and an attempt on another thread may end and resume it
/// before the closure returns. The runtime then orders the two threads with an atomic of its own
/// (`swift_continuation_resume` finds the continuation still pending), and, unlike for a resume
/// after the suspension, tells ThreadSanitizer nothing (swiftlang/swift#57803): the resumer's read
/// of the continuation's context and the task's next use of the same task-allocator memory are
/// then reported as a race, though the runtime orders them.
///
/// With the sanitizer (``SanitizerAnnotations/isActive``), a resume from another thread goes
/// through ``resume(_:)`` — the continuation resumed inside a critical section — and the task,
/// once its wait returns, passes through the same critical section (``awaited()``): it cannot get
/// there before the resumer left, so the resume happens before what the task does next, as the
/// sanitizer sees it. Without the sanitizer both are one relaxed load. Nothing but the resume
/// runs in the critical section (an executor's `enqueue`, which queues the task) — unless the
/// executor runs the task's job inline, in `enqueue`: then the task runs inside the critical
/// section, on the resumer's thread, and its own resumes and `awaited()` there find this thread
/// inside it already (``PerThread/inHandoff``) and do not lock again (which would trap: "Recursive
/// call to lock Mutex"); they are ordered by the thread itself.
package enum ContinuationHandoff {
  private final class Owner: Sendable {}
  private static let owner = Owner()
  private static let lock = Mutex(())

  /// Runs `resume`, which resumes a continuation, visibly to the sanitizer.
  @inline(__always) package static func resume(_ resume: () -> Void) {
    guard SanitizerAnnotations.isActive else { return resume() }
    let thread = PerThread.current
    guard !thread.pointee.inHandoff else { return resume() }
    lock.withLock(owner: owner) { _ in
      thread.pointee.inHandoff = true
      defer { thread.pointee.inHandoff = false }
      resume()
    }
  }

  /// Called by a task whose wait on a continuation returned (or threw), before anything else.
  @inline(__always) package static func awaited() {
    guard SanitizerAnnotations.isActive, !PerThread.current.pointee.inHandoff else { return }
    lock.withLock(owner: owner) { _ in }
  }
}

extension UnsafeContinuation where T: Sendable {
  /// `resume(with:)`, from a thread other than the waiting task's (``ContinuationHandoff``).
  @inline(__always) package func handOff(_ result: Result<T, E>) {
    ContinuationHandoff.resume { resume(with: result) }
  }

  /// `resume(throwing:)`, from a thread other than the waiting task's (``ContinuationHandoff``).
  @inline(__always) package func handOff(throwing error: E) {
    ContinuationHandoff.resume { resume(throwing: error) }
  }
}

extension UnsafeContinuation where T == Void {
  /// `resume()`, from a thread other than the waiting task's (``ContinuationHandoff``).
  @inline(__always) package func handOff() {
    ContinuationHandoff.resume { resume() }
  }
}
