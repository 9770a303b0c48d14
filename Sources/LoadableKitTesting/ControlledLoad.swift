import LoadableKit
import Synchronization

/// A load operation that a test finishes by hand.
///
/// Each call of ``operation`` is one *attempt*: it suspends until the test calls ``resolve(_:)``
/// or ``fail(_:)``, and counts itself in ``startCount``. Use it to put an ``AsyncLoadable`` in any
/// state at a moment of your choosing, without sleeps:
///
/// ```swift
/// let control = ControlledLoad<Int>()
/// let loadable = AsyncLoadable(control.operation)
/// async let value = loadable.fetch()
/// await control.waitForStart()         // the attempt is running
/// control.resolve(42)                  // and now it returns
/// #expect(try await value == 42)
/// #expect(control.startCount == 1)
/// ```
///
/// Attempts are resolved in the order they started. By default an attempt whose task is cancelled
/// throws `CancellationError` at once; with `ignoresCancellation: true` it keeps waiting for the
/// test, like work that does not check for cancellation.
public final class ControlledLoad<Value: Sendable>: Sendable {
  private struct Pending {
    var id: UInt64
    var continuation: UnsafeContinuation<Value, any Error>
  }

  private struct State {
    var nextID: UInt64 = 0
    var started = 0
    var cancelled = 0
    var running = 0
    var maxRunning = 0
    var pending: [Pending] = []
    var cancelledEarly: Set<UInt64> = []
    var startWaiters = CountWaits()
  }

  private let state = Mutex(State())
  private let ignoresCancellation: Bool

  /// Creates a controlled load.
  /// - Parameter ignoresCancellation: when `true`, a cancelled attempt keeps waiting for
  ///   ``resolve(_:)`` or ``fail(_:)`` instead of throwing `CancellationError`.
  public init(ignoresCancellation: Bool = false) {
    self.ignoresCancellation = ignoresCancellation
  }

  /// The operation to give to ``AsyncLoadable/init(_:)``.
  public var operation: @Sendable () async throws -> Value {
    { [self] in try await self.run() }
  }

  /// A new loadable driven by this control.
  public func makeLoadable() -> AsyncLoadable<Value> { AsyncLoadable(operation) }

  /// How many attempts have started.
  public var startCount: Int { state.withLock(owner: self) { $0.started } }
  /// How many attempts are waiting for the test.
  public var pendingCount: Int { state.withLock(owner: self) { $0.pending.count } }
  /// How many attempts ended because their task was cancelled.
  public var cancelledCount: Int { state.withLock(owner: self) { $0.cancelled } }
  /// The largest number of attempts that ever ran at the same time.
  public var maxConcurrentAttempts: Int { state.withLock(owner: self) { $0.maxRunning } }

  /// Waits until at least `count` attempts have started in total.
  ///
  /// - Parameters:
  ///   - count: how many attempts, in total, to wait for.
  ///   - timeout: how long, in real time, to wait before giving up: a bound on an attempt that
  ///     never starts, not a way to wait (``TestKit/defaultTimeout``).
  /// - Throws: ``TestKitTimeout``, saying how many attempts started, wait and were cancelled,
  ///   when `timeout` passes first; `CancellationError` when the waiting task is cancelled (a
  ///   test's time limit cancels it).
  public func waitForStart(_ count: Int = 1, timeout: Duration = TestKit.defaultTimeout) async throws {
    try await boundedWait(
      timeout: timeout,
      register: { id, continuation in
        state.withLock(owner: self) { state in
          if state.started >= count { return true }
          state.startWaiters.add(id, until: count, continuation)
          return false
        }
      },
      withdraw: { [self] id in state.withLock(owner: self) { $0.startWaiters.withdraw(id) } },
      describe: { [self] in
        let (started, pending, cancelled) = state.withLock(owner: self) { ($0.started, $0.pending.count, $0.cancelled) }
        return "ControlledLoad.waitForStart(\(count)): \(started) started, \(pending) waiting for the test, \(cancelled) cancelled"
      })
  }

  /// Ends the oldest waiting attempt with `value`.
  /// - Returns: `false` when no attempt was waiting.
  @discardableResult
  public func resolve(_ value: Value) -> Bool {
    guard let pending = takeOldest() else { return false }
    pending.continuation.handOff(.success(value))
    return true
  }

  /// Ends the oldest waiting attempt with `error`.
  /// - Returns: `false` when no attempt was waiting.
  @discardableResult
  public func fail(_ error: any Error) -> Bool {
    guard let pending = takeOldest() else { return false }
    pending.continuation.handOff(throwing: error)
    return true
  }

  private func takeOldest() -> Pending? {
    state.withLock(owner: self) { $0.pending.isEmpty ? nil : $0.pending.removeFirst() }
  }

  private func run() async throws -> Value {
    await TestKit.delayStart()
    let id = state.withLock(owner: self) { state -> UInt64 in
      state.nextID += 1
      state.running += 1
      state.maxRunning = max(state.maxRunning, state.running)
      return state.nextID
    }
    defer { state.withLock(owner: self) { $0.running -= 1 } }
    let body = {
      defer { ContinuationHandoff.awaited() }
      return try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Value, any Error>) in
        let (cancelled, ready) = self.state.withLock(owner: self) { state -> (Bool, [UnsafeContinuation<Void, any Error>]) in
          state.started += 1
          let ready = state.startWaiters.takeSatisfied(by: state.started)
          if state.cancelledEarly.remove(id) != nil {
            state.cancelled += 1
            return (true, ready)
          }
          state.pending.append(Pending(id: id, continuation: continuation))
          return (false, ready)
        }
        for waiter in ready { waiter.handOff() }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    }
    if ignoresCancellation { return try await body() }
    return try await withTaskCancellationHandler(operation: body) {
      let pending = state.withLock(owner: self) { state -> Pending? in
        if let index = state.pending.firstIndex(where: { $0.id == id }) {
          state.cancelled += 1
          return state.pending.remove(at: index)
        }
        state.cancelledEarly.insert(id)
        return nil
      }
      pending?.continuation.handOff(throwing: CancellationError())
    }
  }
}
