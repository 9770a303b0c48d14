import Synchronization

/// A task-local read only once some code bound it: until then, a read is one atomic load.
///
/// Reading a task-local costs some 120 instructions, and the library reads a few on its hot paths
/// that only tests (and a loader with a `taskExecutor`) ever bind: the bound task executor, for
/// every task the library starts (``TaskLaunch/executor``), and the loader's test seams, on every
/// claim (`ContentLoaderSeams`). The first binding sets a flag for good, before the value is
/// bound, so a task that sees a binding sees the flag too.
package final class GatedTaskLocal<Value: Sendable>: Sendable {
  private let local = TaskLocal<Value?>(wrappedValue: nil)
  private let everBound = Atomic<Bool>(false)

  package init() {}

  /// The value bound on this task, if any.
  package var current: Value? {
    everBound.load(ordering: .acquiring) ? local.get() : nil
  }

  /// Runs `operation` with `value` bound on this task.
  package func withValue<R>(_ value: Value, operation: () throws -> R) rethrows -> R {
    everBound.store(true, ordering: .releasing)
    return try local.withValue(value, operation: operation)
  }

  /// Runs `operation` with `value` bound on this task, on the caller's isolation.
  package func withValue<R>(
    _ value: Value, isolation: isolated (any Actor)? = #isolation, operation: () async throws -> R
  ) async rethrows -> R {
    everBound.store(true, ordering: .releasing)
    return try await local.withValue(value, operation: operation, isolation: isolation)
  }
}
