import Dispatch
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Regression tests for the defects that sat at the seams of the attempt core (issue "One engine"):
/// each was seen on the code before the fix.
@Suite("Engine seams", .timeLimit(.minutes(2)))
struct EngineSeamTests {
  // MARK: - 3. The attempt's context does not leak into tasks the user starts

  /// `a`'s operation starts `Task { try? await b.load() }` and returns; `b`'s operation later calls
  /// `a.fetch()`. Nothing can deadlock: `a` never waits for `b`. Before the fix, the user's task
  /// inherited `a`'s attempt context, its wait for `b` counted as an edge `a → b`, and `b` failed
  /// with `dependencyCycle`.
  @Test func aTaskStartedInsideAnAttemptIsNotPartOfIt() async throws {
    let gate = ControlledLoad<Void>()
    let holder = Mutex<AsyncLoadable<Int>?>(nil)
    let holderOwner = LockOwner()
    let b = AsyncLoadable<Int> {
      try await gate.operation()
      let a = holder.withLock(owner: holderOwner) { $0! }
      return try await a.fetch() + 10
    }
    let a = AsyncLoadable<Int> {
      Task { try? await b.load() }
      return 1
    }
    holder.withLock(owner: holderOwner) { $0 = a }
    try await a.load()
    try await gate.waitForStart()  // the user's task is waiting for `b`
    gate.resolve(())
    try await b.load()
    #expect(b.content == 11)
    #expect(b.loadStatus == .loaded)
    holder.withLock(owner: holderOwner) { $0 = nil }
  }

  /// The same for a task that an observer starts while the attempt that triggered it is still
  /// running on its own task (the observer of `w`, which `a`'s operation starts loading, runs
  /// there, inside `a`'s attempt): the task inherits `a`'s context, but is no part of `a`. Its wait
  /// for `b`, while `b` waits for `a`, is no cycle.
  @Test func aTaskStartedByAnObserverInsideAnAttemptIsNotPartOfIt() async throws {
    let gate = ControlledLoad<Void>()
    let holder = Mutex<AsyncLoadable<Int>?>(nil)
    let holderOwner = LockOwner()
    let outcome = Recorder<String>()
    let b = AsyncLoadable<Int> {
      let a = holder.withLock(owner: holderOwner) { $0! }
      try await a.load()
      return (a.content ?? 0) + 10
    }
    let w = AsyncLoadable<Int> { 5 }
    let observation = w.observeLoadStatus { status in
      guard status == .loading else { return }
      Task {
        do {
          try await b.load()
          outcome.append("\(b.content ?? 0)")
        } catch {
          outcome.append("\(error)")
        }
      }
    }
    let a = AsyncLoadable<Int> {
      w.load { _ in }  // `w`'s observer runs here, on `a`'s task, inside its attempt
      try await gate.operation()
      return 1
    }
    holder.withLock(owner: holderOwner) { $0 = a }
    let loading = Task { try await a.load() }
    try await gate.waitForStart()
    // The observer's task waits for `b`, and `b`'s attempt for `a` (a cycle, had the task been
    // part of `a`'s attempt, would have failed one of the two waits by now).
    await eventually { (b.waiterCount == 1 && a.waiterCount == 2) || outcome.count > 0 }
    #expect(outcome.values.isEmpty)
    gate.resolve(())
    try await loading.value
    await eventually { outcome.count == 1 }
    #expect(outcome.values == ["11"])
    observation.cancel()
    holder.withLock(owner: holderOwner) { $0 = nil }
  }

  /// Structured work of the attempt itself still counts: a plain `load()` from `performLoad()` on
  /// the attempt's own task that closes a cycle fails instead of hanging.
  @Test func aDirectLoadOnTheAttemptsOwnTaskStillFindsACycle() async {
    final class Node: AsyncLoadable<Int>, @unchecked Sendable {
      nonisolated(unsafe) var next: Node?
      override func performLoad() async throws -> Int {
        try await next!.load()
        return 1
      }
    }
    let a = Node()
    let b = Node()
    a.next = b
    b.next = a
    await #expect(throws: LoadableError.dependencyCycle) { try await a.load() }
    a.next = nil
    b.next = nil
  }

  // MARK: - 4. Live views converge

  /// A live view's attempt that a cascade undoes after it recorded the source versions it derived
  /// from must not keep that record: the view goes back to the content it had, and the source's
  /// new content then replaces it, as any change to a loaded view's source does (SPEC §2). With
  /// the record kept, the view took its old content for derived from the new one, and stayed at 10.
  @Test func aViewWhoseRefreshIsUndoneAfterItDerivedCatchesUp() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let view = source.map { $0 * 10 }
    let top = view.map { $0 + 1 }
    let first = Task { try await top.load() }
    try await control.waitForStart(1)
    control.resolve(1)
    try await first.value
    #expect(view.content == 10)
    // top's refresh refreshes the view (an attempt only top's wants) and the source. Once the
    // view's attempt has derived 20 from the source's 2, and before it ends, top's attempt is
    // cancelled: the cascade undoes the view's.
    let refreshed = await LiveViewSeams.withHook(afterDerivationRecordedBy: view, { top.cancelLoad() }) {
      let refresh = Task { try await top.fetch() }
      try? await control.waitForStart(2)
      control.resolve(2)
      return await refresh.result
    }
    #expect(throws: CancellationError.self) { try refreshed.get() }
    #expect(top.loadStatus == .failed)
    #expect(source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == 20)
  }

  /// A `map` whose attempt is computing while its source's refresh lands must not end with the
  /// transform of the old content. Before the fix it stayed at 10 while the source held 2.
  @Test func aMapLoadingWhileItsSourceRefreshesEndsCurrent() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let inTransform = ControlledLoad<Void>()
    let release = DispatchSemaphore(value: 0)
    let view = source.map { value -> Int in
      if value == 1 {
        // Tell the test, then block until the source's refresh has landed.
        Task { try? await inTransform.operation() }
        release.wait()
      }
      return value * 10
    }
    // The view's attempt blocks a thread in its transform: it runs on a queue of its own, so it
    // never takes a thread from the cooperative pool, which the source's refresh (and every other
    // test running meanwhile) needs.
    let executor = QueueExecutor()
    let loading = Task(executorPreference: executor) {
      try await TaskLaunch.executor.withValue(executor) { try await view.load() }
    }
    try await control.waitForStart(1)
    control.resolve(1)
    try await inTransform.waitForStart()
    // The view's attempt has read the source (1) and is computing. Now the source refreshes to 2.
    source.sync()
    try await control.waitForStart(2)
    control.resolve(2)
    await eventually { source.content == 2 && source.loadStatus == .loaded }
    release.signal()
    try await loading.value
    inTransform.resolve(())
    await eventually { view.content == 20 }
    #expect(view.content == 20)
    #expect(view.loadStatus == .loaded)
  }

  /// Many maps created and loaded while their source refreshes: every one ends equal to the
  /// transform of the source's content once everything is quiet. Before the fix some ended stale.
  @Test func mapsCreatedDuringRefreshesConverge() async throws {
    var stale = 0
    var checked = 0
    for _ in 0..<400 {
      let counter = Counter()
      let source = AsyncLoadable<Int> { counter.increment() }
      try await source.load()
      let views = Recorder<AsyncLoadable<Int>>()
      await withTaskGroup(of: Void.self) { group in
        for index in 0..<6 {
          group.addTask {
            if index % 3 == 0 {
              _ = try? await source.fetch()
            } else {
              let view = source.map { $0 * 10 }
              try? await view.load()
              views.append(view)
            }
          }
        }
      }
      let expected = (source.content ?? -1) * 10
      for view in views.values where view.loadStatus == .loaded {
        checked += 1
        if view.content != expected { stale += 1 }
      }
    }
    #expect(checked > 0)
    #expect(stale == 0, "\(stale) of \(checked) maps stale")
  }

  /// A view whose attempt is undone by a cascading cancel, after a source changed during that
  /// attempt, must catch up with the source. Before the fix, an undone attempt did not count as
  /// ended: the view went back to its old content (1) and stayed there while the source held 2.
  @Test func aViewWhoseAttemptIsUndoneCatchesUpWithItsSources() async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let otherControl = ControlledLoad<Int>()
    let other = otherControl.makeLoadable()
    for (loadable, control) in [(source, sourceControl), (other, otherControl)] {
      let loading = Task { try await loadable.load() }
      try await control.waitForStart(1)
      control.resolve(1)
      try await loading.value
    }
    let view = zip([source, other])
    #expect(view.content == [1, 1])
    let dependent = view.map { $0.reduce(0, +) }
    #expect(dependent.content == 2)

    // The dependent's fetch starts the view's attempt, which fetches both sources.
    let fetching = Task { try await dependent.fetch() }
    try await sourceControl.waitForStart(2)
    try await otherControl.waitForStart(2)
    // Somebody else wants both sources' new contents: they keep loading when the cascade comes
    // (an undone source would tell the view, which would then catch up on that account alone).
    let sourceCaller = Task { try await source.load() }
    let otherCaller = Task { try await other.load() }
    await eventually { source.snapshot.status == .loading && sourceControl.pendingCount == 1 }
    sourceControl.resolve(2)
    try await sourceCaller.value
    #expect(source.content == 2)
    #expect(view.loadStatus == .loading)  // the change arrived while the view's attempt ran

    // Cancelling the dependent undoes the view's attempt (only the dependent wanted it).
    dependent.cancelLoad()
    _ = try? await fetching.value
    await eventually { view.loadStatus == .loaded && view.content == [2, 1] }
    #expect(view.content == [2, 1])
    #expect(otherControl.pendingCount == 1)  // the other source has not changed meanwhile
    otherControl.resolve(1)
    try await otherCaller.value
  }

  // MARK: - Review fixes

  /// An attempt kept after it ended does not keep its loadable. A `ContentLoader` key keeps the
  /// last attempt it showed; before the fix the attempt kept its context, and the context kept the
  /// loadable, so a key whose loader went while it loaded was never freed.
  @Test func anEndedAttemptDoesNotKeepItsLoadable() async throws {
    let control = ControlledLoad<Int>()
    weak var weakLoadable: AsyncLoadable<Int>?
    var kept: RunningAttempt?
    do {
      let loadable = control.makeLoadable()
      let loading = Task { try await loadable.load() }
      try await control.waitForStart(1)
      kept = loadable.withState { $0.attempt }
      control.resolve(1)
      try await loading.value
      weakLoadable = loadable
    }
    #expect(kept != nil)
    await eventually { weakLoadable == nil }
    #expect(weakLoadable == nil)
    #expect(kept?.context == nil)
  }

  /// Observers hear of `.loading` before the attempt's task is started, so a fast attempt cannot
  /// resume its callers before observers were told. Before the fix, the caller that started an
  /// attempt launched its task first and told the observers after.
  @Test func observersHearOfLoadingBeforeTheAttemptStarts() async throws {
    let executor = ManualTaskExecutor()
    let loadable = AsyncLoadable<Int> { 1 }
    let launchedFirst = Recorder<Bool>()
    let observation = loadable.observeLoadStatus { status in
      if status == .loading { launchedFirst.append(executor.pendingJobCount > 0) }
    }
    let loading = Task {
      try await TaskLaunch.executor.withValue(executor) { try await loadable.load() }
    }
    await eventually { executor.pendingJobCount > 0 }  // the attempt's task is enqueued
    #expect(launchedFirst.values == [false])
    while executor.runInOrder() > 0 || loadable.loadStatus != .loaded { await Task.yield() }
    try await loading.value
    #expect(loadable.content == 1)
    observation.cancel()
  }

  // MARK: - 5. A consistent snapshot

  @Test func aRetryAfterAFailureShowsNoErrorWhileLoading() async throws {
    let (loadable, control) = try await makeLoadable(in: .failed)
    let retrying = Task { try await loadable.retryLoad() }
    try await control.waitForStart(2)
    let snapshot = loadable.snapshot
    #expect(snapshot.status == .loading)
    #expect(snapshot.error == nil)
    #expect(loadable.loadError == nil)
    control.resolve(2)
    try await retrying.value
  }

  // MARK: - 6. Bounded by default

  /// Callers that join a held attempt and are cancelled leave nothing behind.
  @Test func cancelledWaitersAreFreedWhenTheyLeave() async throws {
    let (loadable, control) = try await makeLoadable(in: .loading)
    for _ in 0..<20 {
      let callers = (0..<500).map { _ in Task { try await loadable.load() } }
      await eventually { loadable.waiterCount == 500 }
      for caller in callers { caller.cancel() }
      for caller in callers { _ = try? await caller.value }
    }
    let stored = loadable.state.withLock(owner: loadable) { $0.attempt?.storedWaiterCount ?? -1 }
    #expect(loadable.waiterCount == 0)
    #expect(stored < 64)
    control.resolve(1)
    try await loadable.load()
  }

  /// A status stream nobody reads keeps only the newest changes.
  @Test func anUnreadStatusStreamIsBounded() async throws {
    var loadable: AsyncLoadable<Int>? = AsyncLoadable<Int> { throw Boom() }
    let stream = loadable!.loadStatusUpdates
    for _ in 0..<1_000 { try? await loadable!.retryLoad() }
    loadable = nil  // finishes the stream
    var count = 0
    for await _ in stream { count += 1 }
    #expect(count <= AsyncLoadable<Int>.defaultStatusBufferSize + 1)
    #expect(count > 0)
  }

  // MARK: - Nothing recursive in the depth of a graph

  /// Releasing the end of a very long chain does not recurse once per link.
  @Test func releasingALongChainDoesNotRecurse() async {
    let depth = 200_000
    await Task.detached {
      var end: AsyncLoadable<Int> = AsyncLoadable(content: 0)
      for _ in 0..<depth { end = end.map { $0 + 1 } }
      #expect(end.content == depth)
      end = AsyncLoadable(content: 0)  // releases the whole chain
    }.value
  }
}

/// A task executor on a serial dispatch queue: work that blocks a thread on it leaves the
/// cooperative pool alone.
final class QueueExecutor: TaskExecutor, @unchecked Sendable {
  private let queue = DispatchQueue(label: "org.loadablekit.tests.queue-executor")

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}
