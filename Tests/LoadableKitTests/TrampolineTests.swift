@testable import LoadableKit
import Synchronization
import Testing

/// Work past the trampoline's depth is queued on the thread and run by the outermost run before
/// it returns, including work queued by a `deinit` that releasing run work set off.
@Suite("Trampoline", .timeLimit(.minutes(1)))
struct TrampolineTests {
  /// Runs `body` nested `depth` runs deep.
  static func nest(_ depth: Int, _ body: @escaping @Sendable () -> Void) {
    if depth == 0 { body() } else { Trampoline.run { nest(depth - 1, body) } }
  }

  /// Calls `onDeinit` when released (user code run by a release).
  final class ReleaseHook: Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { onDeinit() }
  }

  final class Flag: Sendable {
    let state = Mutex(0)
    func add() { state.withLock { $0 += 1 } }
    var count: Int { state.withLock { $0 } }
  }

  @Test func deepWorkRunsBeforeTheOutermostRunReturns() {
    let ran = Flag()
    Trampoline.run { Self.nest(200) { ran.add() } }
    #expect(ran.count == 1)
    #expect(PerThread.current.pointee.trampolineQueue.isEmpty)
  }

  /// Queued work is the last holder of an object whose `deinit` runs work past the depth: it is
  /// released after it ran, in the drain, and what that queues runs too. (Released while the
  /// queue was being emptied, it was left in the queue for whatever run came next.)
  @Test func workQueuedByTheReleaseOfRunWorkRunsBeforeTheOutermostRunReturns() {
    let ran = Flag()
    Trampoline.run {
      let hook = ReleaseHook { Self.nest(40) { ran.add() } }
      Self.nest(40) { [hook] in _ = hook }
    }
    #expect(ran.count == 1, "the deinit's deep work ran before the outermost run returned")
    #expect(PerThread.current.pointee.trampolineQueue.isEmpty)
  }

  /// The same, with many items queued at once and the hook released among them.
  @Test func workQueuedByAReleaseAmongManyQueuedItemsRuns() {
    let ran = Flag()
    let items = Flag()
    Trampoline.run {
      var hook: ReleaseHook? = ReleaseHook { Self.nest(40) { ran.add() } }
      for index in 0..<70 {
        Self.nest(40) { [hook] in
          _ = hook
          items.add()
        }
        if index == 0 { hook = nil }
      }
    }
    #expect(items.count == 70)
    #expect(ran.count == 1)
    #expect(PerThread.current.pointee.trampolineQueue.isEmpty)
  }
}
