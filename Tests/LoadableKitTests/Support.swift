@testable import LoadableKit
import LoadableKitTesting
import Synchronization

struct Boom: Error, Equatable {
  var code = 0
}

/// Yields, a bounded number of times, until the current task runs at `priority` or higher. A
/// caller who joins an attempt raises its task just after the test sees it join (`waiterCount`),
/// outside the lock: an attempt that records its priority waits for the raise with this. (The
/// test's own expectation still fails if the raise never comes.)
func waitUntilRaised(to priority: TaskPriority) async {
  for _ in 0..<10_000 where Task.currentPriority < priority { await Task.yield() }
}

/// Yields until `condition` holds, without sleeping; fails the test once it has yielded `limit`
/// times *and* `timeout` of real time has passed: a bound on a condition that never comes, not a
/// way to wait. Either bound alone fails correct tests: under ThreadSanitizer on a busy machine a
/// condition that needs another thread's progress ran out of the count (in a fresh-clone CI run),
/// and behind thousands of queued tasks each yield waits its turn, so the count takes longer than
/// the time (the stress tests, under ThreadSanitizer beside two busy processes).
func eventually(
  _ limit: Int = 200_000, timeout: Duration = .seconds(20), _ condition: () -> Bool,
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  let deadline = ContinuousClock.now.advanced(by: timeout)
  var yields = 0
  while !condition() {
    if yields >= limit, ContinuousClock.now >= deadline {
      Issue.record("condition never became true", sourceLocation: sourceLocation)
      return
    }
    // The test was cancelled (its time limit): it has failed; yielding on would only keep a
    // thread of the pool busy, and the run from ending, until the bounds.
    if Task.isCancelled {
      Issue.record("condition not true when the test was cancelled", sourceLocation: sourceLocation)
      return
    }
    yields += 1
    await Task.yield()
  }
}

/// A thread-safe list that tests append to from handlers.
final class Recorder<Element: Sendable>: Sendable {
  private let storage = Mutex<[Element]>([])
  func append(_ element: Element) { storage.withLock(owner: self) { $0.append(element) } }
  var values: [Element] { storage.withLock(owner: self) { $0 } }
  var count: Int { storage.withLock(owner: self) { $0.count } }
}

/// A loadable brought into `status` through a controlled load: loaded holds 1, failed holds
/// `Boom(1)`, loading has one attempt pending.
func makeLoadable(
  in status: LoadStatus, ignoresCancellation: Bool = false
) async throws -> (AsyncLoadable<Int>, ControlledLoad<Int>) {
  let control = ControlledLoad<Int>(ignoresCancellation: ignoresCancellation)
  let loadable = control.makeLoadable()
  switch status {
  case .notLoaded:
    break
  case .loading:
    loadable.sync()
    try await control.waitForStart()
  case .loaded:
    loadable.sync()
    try await control.waitForStart()
    control.resolve(1)
    await eventually { loadable.loadStatus == .loaded }
  case .failed:
    loadable.sync()
    try await control.waitForStart()
    control.fail(Boom(code: 1))
    await eventually { loadable.loadStatus == .failed }
  }
  return (loadable, control)
}

import Testing

/// A thread-safe counter.
final class Counter: Sendable {
  private let value = Atomic<Int>(0)
  @discardableResult func increment() -> Int { value.wrappingAdd(1, ordering: .relaxed).newValue }
  var count: Int { value.load(ordering: .relaxed) }
}

/// Names a `Mutex` that is not a stored property of a class for `withLock(owner:)`, which makes
/// its critical sections visible to ThreadSanitizer (it cannot see `Mutex` on Linux).
final class LockOwner: Sendable {}

/// What a test waiting on a task's value gets when the test is cancelled (its time limit) before
/// the task ends.
struct StillRunning: Error, CustomStringConvertible {
  var description: String { "the test was cancelled (its time limit) while the task it awaited was still running" }
}

extension Task {
  /// `value`, but bounded by the test: when the waiting test is cancelled — its time limit — the
  /// task is cancelled too and the wait ends at once with ``StillRunning``, whether or not the
  /// task ever ends. A waiter the code under test lost fails its test instead of hanging the run.
  var outcome: Success {
    get async throws {
      let race = OutcomeRace<Success>()
      defer { race.settle() }
      return try await withTaskCancellationHandler {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Success, any Error>) in
          race.set(continuation)
          Task<Void, Never> {
            do { race.finish(.success(try await self.value)) } catch { race.finish(.failure(error)) }
          }
          if Task<Never, Never>.isCancelled { race.finish(.failure(StillRunning())) }
        }
      } onCancel: {
        self.cancel()
        race.finish(.failure(StillRunning()))
      }
    }
  }
}

/// A continuation resumed by whichever comes first; the others are dropped.
///
/// The continuation is resumed under the lock, and the resumed task takes the lock once more
/// (``settle()``) before it goes on. That orders, for ThreadSanitizer, what `resume` reads of the
/// continuation's context before what the resumed task later writes to the same memory. The
/// runtime orders them itself, but when the resume comes before the task has suspended it does
/// so through atomics ThreadSanitizer cannot see (swiftlang/swift#57803): CI reported that pair
/// as a data race in both runs that had a build competing for the cores during the
/// ThreadSanitizer step (`OutcomeRace.finish` reading, `KeyedSource.waitUntil` writing the reused
/// frame later).
private final class OutcomeRace<Value: Sendable>: Sendable {
  private let slot = Mutex<(continuation: UnsafeContinuation<Value, any Error>?, early: Result<Value, any Error>?)>((nil, nil))

  func set(_ continuation: UnsafeContinuation<Value, any Error>) {
    let early = slot.withLock(owner: self) { slot -> Result<Value, any Error>? in
      if let early = slot.early { return early }
      slot.continuation = continuation
      return nil
    }
    if let early { continuation.resume(with: early) }
  }

  func finish(_ result: Result<Value, any Error>) {
    slot.withLock(owner: self) { slot in
      guard let continuation = slot.continuation else {
        if slot.early == nil { slot.early = result }
        return
      }
      slot.continuation = nil
      slot.early = .failure(StillRunning())  // finished: later results are dropped
      continuation.resume(with: result)  // under the lock: see the type's documentation
    }
  }

  /// Called by the resumed task before it goes on: see the type's documentation.
  func settle() {
    slot.withLock(owner: self) { _ in }
  }
}

/// Runs `body` in a task of its own and waits for it bounded by the test: when the test's time
/// limit cancels the test, the wait ends with ``StillRunning`` even if `body` is stuck on a
/// waiter the code under test lost (a task group would wait for it forever).
func bounded<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
  try await Task(operation: body).outcome
}

import TestProcessGuard

/// Whether the test process ends when the `swift test` that started it is gone (Linux; see
/// `Tests/TestProcessGuard`). Read by a test, which also keeps the guard linked in.
var testProcessGuardIsRunning: Bool { test_process_guard_is_running() != 0 }
