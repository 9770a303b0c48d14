import Dispatch
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a live `map` update computed from older source versions is refused.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

/// A gate that blocks the *thread* of the code that enters it until the test opens it: how a
/// test holds a synchronous transform (a `map`'s) half-way. The test learns that the code has
/// entered without blocking a thread of its own.
final class PromiseBlockingGate: @unchecked Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  private let state = Mutex<(entered: Bool, waiters: [UnsafeContinuation<Void, Never>])>((false, []))

  /// Reports the arrival, then blocks the calling thread until ``open()``.
  func enterAndWait() {
    let waiters = state.withLock(owner: self) { state in
      state.entered = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
    semaphore.wait()
  }

  /// Waits until some code has entered the gate.
  func waitUntilEntered() async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let entered = state.withLock(owner: self) { state in
        if state.entered { return true }
        state.waiters.append(continuation)
        return false
      }
      if entered { continuation.resume() }
    }
  }

  /// Lets the blocked code go on.
  func open() { semaphore.signal() }
}

/// A task executor on a serial dispatch queue of its own: the work that blocks a thread in a
/// ``PromiseBlockingGate`` blocks this queue's thread, not one of the cooperative pool's.
final class PromiseQueueExecutor: TaskExecutor, @unchecked Sendable {
  private let queue = DispatchQueue(label: "org.loadablekit.tests.promise-executor")

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}

@Suite("Promises: a live map keeps the newest update", .timeLimit(.minutes(1)))
struct PromiseLiveMapTests {

  /// The source changes to 2, and the view's live update for 2 is held in its transform; the
  /// source then changes to 3, whose update lands. The update computed from 2, finishing last,
  /// must not overwrite the one from 3.
  @Test func aLiveMapUpdateFromAnOlderSourceVersionIsRefused() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let gate = PromiseBlockingGate()
    let view = source.map { value -> Int in
      if value == 2 { gate.enterAndWait() }
      return value * 10
    }
    async let first = view.fetch()
    try await control.waitForStart(1)
    control.resolve(1)
    #expect(try await first == 10)

    // The refresh to 2 ends on a queue of its own, where the view's update blocks in the gate.
    let executor = PromiseQueueExecutor()
    let second = Task {
      try await TaskLaunch.executor.withValue(executor) { try await source.fetch() }
    }
    try await control.waitForStart(2)
    control.resolve(2)
    await gate.waitUntilEntered()
    // Meanwhile the source refreshes to 3; the view's update from 3 lands before the call returns.
    let third = Task { try await source.fetch() }
    try await control.waitForStart(3)
    control.resolve(3)
    #expect(try await third.value == 3)
    #expect(view.content == 30)
    // The update from 2 finishes now, and is refused.
    gate.open()
    #expect(try await second.value == 2)
    #expect(source.content == 3)
    #expect(view.content == 30)
    #expect(!view.needsSync)
  }
}
