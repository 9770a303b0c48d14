import Synchronization

/// Places in a live view's attempt where a test runs code of its own, to land in a moment that no
/// schedule of tasks can reach: between two statements that run on one thread with no suspension
/// between them.
///
/// Not task-locals, as ``ContentLoaderSeams`` are: the code runs on the task of whichever attempt
/// delivered last (attempts inherit no task-locals), not on the test's. A hook is installed for
/// one view, by its identity; with none installed, passing a seam costs one relaxed load.
enum LiveViewSeams {
  private static let installed = Atomic<Int>(0)
  private static let hooks = Mutex<[ObjectIdentifier: @Sendable () -> Void]>([:])
  /// Names the hooks' critical sections for ThreadSanitizer (``Mutex/withLock(owner:_:)``).
  private final class LockOwner: Sendable {}
  private static let lockOwner = LockOwner()

  /// Runs `body` with `hook` called where `view`'s attempt has recorded the source versions it
  /// derived its content from and has not yet ended (``afterDerivationRecorded(_:)``).
  static func withHook<R>(
    afterDerivationRecordedBy view: AnyObject, _ hook: @escaping @Sendable () -> Void, _ body: () async throws -> R
  ) async rethrows -> R {
    let id = ObjectIdentifier(view)
    let replaced = hooks.withLock(owner: lockOwner) { $0.updateValue(hook, forKey: id) }
    _ = replaced  // released after the lock
    installed.add(1, ordering: .releasing)
    defer {
      installed.subtract(1, ordering: .releasing)
      _ = hooks.withLock(owner: lockOwner) { $0.removeValue(forKey: id) }  // released after the lock
    }
    return try await body()
  }

  /// A live view's attempt without a task recorded what it derived from, and has not ended yet.
  @inline(__always)
  static func afterDerivationRecorded(_ view: AnyObject) {
    // Relaxed: a hook is installed before the test starts what passes the seam, and the hooks are
    // read under their lock.
    guard installed.load(ordering: .relaxed) > 0 else { return }
    let id = ObjectIdentifier(view)
    if let hook = hooks.withLock(owner: lockOwner, { $0[id] }) { hook() }
  }
}
