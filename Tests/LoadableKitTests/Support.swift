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

/// Yields until `condition` holds, without sleeping; fails the test after `limit` yields.
func eventually(
  _ limit: Int = 200_000, _ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation
) async {
  for _ in 0..<limit {
    if condition() { return }
    await Task.yield()
  }
  Issue.record("condition never became true", sourceLocation: sourceLocation)
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
    await control.waitForStart()
  case .loaded:
    loadable.sync()
    await control.waitForStart()
    control.resolve(1)
    await eventually { loadable.loadStatus == .loaded }
  case .failed:
    loadable.sync()
    await control.waitForStart()
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
