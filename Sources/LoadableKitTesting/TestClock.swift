import LoadableKit
import Synchronization

/// A `Clock` whose time moves only when a test says so.
///
/// Code under test takes `some Clock<Duration>`; tests pass a `TestClock`, wait until the code is
/// suspended on it, and move time forward. Nothing sleeps for real.
///
/// ```swift
/// let clock = TestClock()
/// let task = Task { try await clock.sleep(for: .seconds(5)) }
/// await clock.waitForSleepers(1)        // the task is now suspended on the clock
/// await clock.advance(by: .seconds(5))  // and is resumed
/// try await task.value
/// ```
public final class TestClock: Clock, Sendable {
  /// An instant of a ``TestClock``: the time elapsed since the clock was created.
  public struct Instant: InstantProtocol, Sendable, Hashable, CustomStringConvertible {
    /// The time since the clock's start.
    public var offset: Duration
    public init(offset: Duration = .zero) { self.offset = offset }
    public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
    public func duration(to other: Instant) -> Duration { other.offset - offset }
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    public var description: String { "t+\(offset)" }
  }

  private struct Sleeper {
    var id: UInt64
    var deadline: Instant
    var continuation: UnsafeContinuation<Void, any Error>
  }

  private struct State {
    var now = Instant()
    var nextID: UInt64 = 0
    var sleepers: [Sleeper] = []
    var cancelled: Set<UInt64> = []
    var countWaiters = CountWaits()
  }

  private let state = Mutex(State())

  /// Creates a clock at time zero.
  public init() {}

  /// The current instant; it changes only through ``advance(by:)``, ``advance(to:)`` and ``run()``.
  public var now: Instant { state.withLock(owner: self) { $0.now } }

  /// `.zero`: a test clock is exact.
  public var minimumResolution: Duration { .zero }

  /// The number of tasks currently suspended in ``sleep(until:tolerance:)``.
  public var sleeperCount: Int { state.withLock(owner: self) { $0.sleepers.count } }

  /// The deadlines of the tasks currently sleeping, earliest first.
  public var pendingDeadlines: [Instant] {
    state.withLock(owner: self) { $0.sleepers.map(\.deadline).sorted() }
  }

  /// Suspends until the clock reaches `deadline`, or throws `CancellationError` when the calling
  /// task is cancelled.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let id = state.withLock(owner: self) { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      return try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        enum Outcome { case wait, ready, cancelled }
        let (outcome, wake) = state.withLock(owner: self) { state -> (Outcome, [UnsafeContinuation<Void, any Error>]) in
          if state.cancelled.remove(id) != nil || Task.isCancelled { return (.cancelled, []) }
          if deadline <= state.now { return (.ready, []) }
          state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
          return (.wait, state.countWaiters.takeSatisfied(by: state.sleepers.count))
        }
        for waiter in wake { waiter.handOff() }
        switch outcome {
        case .wait: break
        case .ready: continuation.resume()
        case .cancelled: continuation.resume(throwing: CancellationError())
        }
      }
    } onCancel: {
      let sleeper = state.withLock(owner: self) { state -> Sleeper? in
        if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
          return state.sleepers.remove(at: index)
        }
        state.cancelled.insert(id)
        return nil
      }
      sleeper?.continuation.handOff(throwing: CancellationError())
    }
  }

  /// Waits until at least `count` tasks are sleeping on this clock.
  ///
  /// Use it to synchronize with the code under test before moving time, instead of yielding and
  /// hoping the other task got there.
  ///
  /// - Parameters:
  ///   - count: how many sleepers to wait for.
  ///   - timeout: how long, in real time, to wait before giving up: a bound on a lost sleeper,
  ///     not a way to wait (``TestKit/defaultTimeout``).
  /// - Throws: ``TestKitTimeout``, saying how many tasks were sleeping and until when, when
  ///   `timeout` passes first; `CancellationError` when the waiting task is cancelled (a test's
  ///   time limit cancels it).
  public func waitForSleepers(_ count: Int = 1, timeout: Duration = TestKit.defaultTimeout) async throws {
    try await boundedWait(
      timeout: timeout,
      register: { id, continuation in
        state.withLock(owner: self) { state in
          if state.sleepers.count >= count { return true }
          state.countWaiters.add(id, until: count, continuation)
          return false
        }
      },
      withdraw: { [self] id in state.withLock(owner: self) { $0.countWaiters.withdraw(id) } },
      describe: { [self] in
        let (now, deadlines) = state.withLock(owner: self) { ($0.now, $0.sleepers.map(\.deadline).sorted()) }
        return "TestClock.waitForSleepers(\(count)) at \(now): \(deadlines.count) sleeping (until \(deadlines))"
      })
  }

  /// Moves time forward by `duration`, resuming every sleeper whose deadline is reached, earliest
  /// first.
  public func advance(by duration: Duration) async {
    await advance(to: now.advanced(by: duration))
  }

  /// Moves time forward to `deadline`, resuming every sleeper whose deadline is reached, earliest
  /// first. Between resumptions it yields so that resumed tasks may sleep again.
  public func advance(to deadline: Instant) async {
    while true {
      let due = state.withLock(owner: self) { state -> Sleeper? in
        guard let index = state.sleepers.indices.min(by: { state.sleepers[$0].deadline < state.sleepers[$1].deadline }),
          state.sleepers[index].deadline <= deadline
        else {
          if state.now < deadline { state.now = deadline }
          return nil
        }
        let sleeper = state.sleepers.remove(at: index)
        if state.now < sleeper.deadline { state.now = sleeper.deadline }
        return sleeper
      }
      guard let due else { return }
      due.continuation.handOff()
      await Task.yield()
    }
  }

  /// Advances to each pending deadline in turn until no task is sleeping.
  public func run() async {
    while let next = pendingDeadlines.first {
      await advance(to: next)
    }
  }

}
