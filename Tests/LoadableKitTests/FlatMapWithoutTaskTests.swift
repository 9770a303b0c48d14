import Dispatch
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A `flatMap`'s attempt without a task of its own (#28): it waits for its source, runs the
/// transform, then waits for the loadable the transform returned — and must behave as the attempt
/// on a task did: a cancel reaches whichever wait is in progress, or keeps the second from
/// beginning; the transform sees none of the caller's task-locals (SPEC §1); a cycle through the
/// inner loadable fails.
@Suite("A flatMap without a task", .timeLimit(.minutes(1)))
struct FlatMapWithoutTaskTests {
  /// Holds the `flatMap` for its own transform to reach.
  final class Holder: Sendable {
    let loadable = Mutex<AsyncLoadable<Int>?>(nil)
  }

  /// Cancelled after its source answered and while its transform runs, the attempt does not go on
  /// to load the loadable the transform returned: nothing waits for it, and nobody else wants it.
  @Test func aCancelWhileTheTransformRunsKeepsTheInnerLoadFromStarting() async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let innerControl = ControlledLoad<Int>()
    let inner = innerControl.makeLoadable()
    let holder = Holder()
    let view = source.flatMap { _ in
      holder.loadable.withLock { $0 }?.cancelLoad()
      return inner
    }
    holder.loadable.withLock { $0 = view }
    let load = Task { try await view.load() }
    try await sourceControl.waitForStart()
    sourceControl.resolve(1)
    await #expect(throws: CancellationError.self) { try await load.outcome }
    #expect(innerControl.startCount == 0, "the inner loadable was asked to load by a cancelled attempt")
    #expect(inner.loadStatus == .notLoaded)
    holder.loadable.withLock { $0 = nil }
  }

  /// Cancelled while it waits for the inner loadable, the attempt withdraws that wait, and the
  /// inner attempt, which only it wanted, is undone — whether the source answered at once (already
  /// loaded) or later.
  @Test(arguments: [true, false])
  func aCancelWhileItWaitsForTheInnerLoadableUndoesThatLoad(sourceLoaded: Bool) async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceLoaded ? AsyncLoadable(content: 1) : sourceControl.makeLoadable()
    let innerControl = ControlledLoad<Int>()
    let inner = innerControl.makeLoadable()
    let view = source.flatMap { _ in inner }
    let load = Task { try await view.load() }
    if !sourceLoaded {
      try await sourceControl.waitForStart()
      sourceControl.resolve(1)
    }
    try await innerControl.waitForStart()
    #expect(inner.loadStatus == .loading)
    view.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.outcome }
    await eventually { inner.loadStatus == .notLoaded }
    #expect(inner.loadStatus == .notLoaded, "the inner attempt nobody wants any more kept loading")
  }

  /// A caller of higher priority who joins while the transform runs raises the attempt between
  /// its two waits: the raise goes on to the second, the inner loadable's attempt (on a task, the
  /// attempt's task was raised, and the inner load asked for from it).
  @Test func aPriorityRaisedWhileTheTransformRunsReachesTheInnerLoad() async throws {
    let seen = UpstreamDemandTests.Seen()
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let innerGate = ControlledLoad<Void>()
    let inner = AsyncLoadable<Int> {
      try await innerGate.operation()
      await waitUntilRaised(to: .high)
      seen.record("inner")
      return 2
    }
    let inTransform = ControlledLoad<Void>()
    let release = DispatchSemaphore(value: 0)
    let view = source.flatMap { _ in
      // Tell the test, then block until the high-priority caller has joined.
      Task { try? await inTransform.operation() }
      release.wait()
      return inner
    }
    // The transform blocks the thread the source's attempt ends on: that attempt runs on a queue
    // of its own, never on a thread of the cooperative pool.
    let executor = QueueExecutor()
    let low = Task(executorPreference: executor, priority: .background) {
      try await TaskLaunch.$executor.withValue(executor) { try await view.load() }
    }
    try await sourceControl.waitForStart()
    sourceControl.resolve(1)
    try await inTransform.waitForStart()
    let high = Task(priority: .high) { try await view.load() }
    await eventually { view.waiterCount == 2 }
    release.signal()
    try await innerGate.waitForStart()
    innerGate.resolve(())
    try await high.outcome
    try await low.outcome
    #expect(view.content == 2)
    let priority = try #require(seen["inner"])
    #expect(priority >= .high, "the inner loadable ran at \(priority)")
  }

  /// The transform runs on no task of the caller's, even when the source is loaded and the
  /// attempt could have gone on inside the call that started it.
  @Test(arguments: [true, false])
  func theTransformSeesNoTaskLocalOfTheCaller(joined: Bool) async throws {
    let seen = Recorder<String>()
    let source = AsyncLoadable(content: 1)
    let inner = AsyncLoadable(content: 2)
    if joined {
      let view = source.joined { _ in
        seen.append(CallerTrace.id ?? "none")
        return inner
      }
      try await CallerTrace.$id.withValue("load") { try await view.load() }
      #expect(view.content?.0 == 1 && view.content?.1 == 2)
    } else {
      let view = source.flatMap { _ in
        seen.append(CallerTrace.id ?? "none")
        return inner
      }
      try await CallerTrace.$id.withValue("load") { try await view.load() }
      #expect(view.content == 2)
    }
    #expect(seen.values == ["none"])
  }

  /// The loadable the transform returned waits for the `flatMap` itself: the second wait closes a
  /// cycle, and both fail with ``LoadableError/dependencyCycle`` instead of waiting for each other.
  @Test func anInnerLoadableThatWaitsForTheFlatMapIsACycle() async throws {
    let source = AsyncLoadable { 1 }
    let holder = Holder()  // the inner loadable, reached weakly enough to be freed afterwards
    let view = source.flatMap { _ in holder.loadable.withLock { $0 }! }
    let inner = AsyncLoadable { 2 }
    inner.addDependency(view)
    holder.loadable.withLock { $0 = inner }
    await #expect(throws: LoadableError.dependencyCycle) { try await view.load() }
    #expect(inner.loadStatus == .failed)
    holder.loadable.withLock { $0 = nil }
  }

  /// The source's failure and the transform's error end the attempt, as on a task.
  @Test func theSourcesFailureAndTheTransformsErrorEndTheAttempt() async throws {
    let failing = AsyncLoadable<Int> { throw Boom(code: 1) }.flatMap { _ in AsyncLoadable(content: 2) }
    await #expect(throws: Boom(code: 1)) { try await failing.load() }
    let throwing = AsyncLoadable { 1 }.flatMap { _ -> AsyncLoadable<Int> in throw Boom(code: 2) }
    await #expect(throws: Boom(code: 2)) { try await throwing.load() }
    let innerFails = AsyncLoadable { 1 }.flatMap { _ in AsyncLoadable<Int> { throw Boom(code: 3) } }
    await #expect(throws: Boom(code: 3)) { try await innerFails.load() }
  }
}
