// The code a user would write without LoadableKit, measured in the same run as the library so
// that every claim is a ratio on one machine at one moment.

import Synchronization

// MARK: - The hand-written actor memoizer

/// What most apps write: an actor that keeps the in-flight `Task` and hands its value to every
/// caller. It coalesces concurrent callers, but every call hops onto the actor and awaits
/// `Task.value`, even long after the value arrived.
actor ActorMemoizer<Value: Sendable> {
  private let operation: @Sendable () async throws -> Value
  private var task: Task<Value, any Error>?

  init(_ operation: @escaping @Sendable () async throws -> Value) {
    self.operation = operation
  }

  func value() async throws -> Value {
    if let task { return try await task.value }
    let operation = operation
    let task = Task { try await operation() }
    self.task = task
    return try await task.value
  }
}

// MARK: - The Mutex floor

/// The least a thread-safe "loaded?" check can cost: one uncontended `Mutex.withLock` reading the
/// stored value.
final class MutexBox<Value: Sendable>: Sendable {
  private let state: Mutex<Value?>

  init(_ value: Value?) {
    state = Mutex(value)
  }

  /// A synchronous read, the floor for the hot path.
  @inline(never)
  func value() -> Value? {
    state.withLock { $0 }
  }
}

// MARK: - Test doubles for in-flight loads

/// Stands in for a network call in the closures that loadables are made with.
@inline(never)
@Sendable func fetchValue(_ key: Int) async throws -> Int { key }

/// A one-shot latch: `wait()` suspends until `open()` is called (or returns at once afterwards).
///
/// The loads under test wait on it, so a benchmark decides exactly when "the load ends".
final class Gate: Sendable {
  private enum State {
    case closed([UnsafeContinuation<Void, Never>])
    case open
  }

  private let state = Mutex(State.closed([]))

  func wait() async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let resumeNow = state.withLock { state -> Bool in
        switch state {
        case .open: return true
        case .closed(var waiters):
          waiters.append(continuation)
          state = .closed(waiters)
          return false
        }
      }
      if resumeNow { continuation.resume() }
    }
  }

  func open() {
    let waiters = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
      defer { state = .open }
      if case .closed(let waiters) = state { return waiters }
      return []
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// The floor for coalescing: waiters that park on a bare continuation and are resumed in a loop.
/// No library can resume a waiting task for less than this; the ratio against it says how much
/// of a coalescing cost is bookkeeping and how much is the Swift runtime rescheduling tasks.
typealias RawContinuationFloor = Gate

/// The floor for a waiter cancelling: callers parked on continuations in a dictionary, each
/// removed and resumed with `CancellationError` by its own task's cancellation handler. What
/// any cancellable coalescer pays in the runtime (the cancel, two task switches) and no more.
final class CancellableWaiters: Sendable {
  private struct State {
    var nextID: UInt64 = 0
    var waiters: [UInt64: UnsafeContinuation<Void, any Error>] = [:]
    var open = false
  }

  private let state = Mutex(State())

  func wait() async throws {
    let id = state.withLock { state in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        let resume = state.withLock { state -> Result<Void, any Error>? in
          if state.open { return .success(()) }
          if Task.isCancelled { return .failure(CancellationError()) }
          state.waiters[id] = continuation
          return nil
        }
        if let resume { continuation.resume(with: resume) }
      }
    } onCancel: {
      state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
    }
  }

  func open() {
    let waiters = state.withLock { state in
      state.open = true
      defer { state.waiters = [:] }
      return state.waiters
    }
    for waiter in waiters.values { waiter.resume() }
  }
}

/// Counts how often an operation ran (the "underlying loads").
final class Counter: Sendable {
  private let count = Atomic<Int>(0)
  func increment() { count.add(1, ordering: .relaxed) }
  var value: Int { count.load(ordering: .relaxed) }
}
