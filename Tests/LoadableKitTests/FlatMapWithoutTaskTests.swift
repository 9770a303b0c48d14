import Dispatch
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A `flatMap`'s attempt runs without a task of its own (#28): it waits for its source, runs the
/// transform — where the source's attempt ended, on the library's task, or on a task of its own
/// when somebody's call delivered the content — then waits for the loadable the transform
/// returned. It must behave as the attempt on a task does — which is what an attempt with load
/// options still runs on. So each test loads the `flatMap` by a caller (`view` itself) and by a
/// dependent (a `map` over it), both without a task, and most also with load options, on a task.
///
/// Cancel reaches whichever wait is in progress, or keeps the second from beginning; the
/// transform sees none of the task-locals of the caller or of whoever delivered the source's
/// content (SPEC §1), and runs at the attempt's priority — asking for the inner loadable at it,
/// not at the source task's — raised by the callers who join; a cycle through the inner loadable
/// fails. Several cases came from a second review of the first version (b1b369a), which broke
/// them.
@Suite("A flatMap without a task", .timeLimit(.minutes(1)))
struct FlatMapWithoutTaskTests {
  /// How the test loads the `flatMap`.
  enum Loader: CaseIterable, CustomTestStringConvertible {
    /// `view` itself: a caller's attempt, without a task.
    case caller
    /// A `map` over it: a dependent's attempt, without a task.
    case dependent
    /// `view` itself with load options: a caller's attempt on a task (`performLoad()`), the
    /// behaviour the others must match.
    case onATask

    /// The two ways that run without a task.
    static let withoutTask: [Loader] = [.caller, .dependent]

    var testDescription: String {
      switch self {
      case .caller: "by a caller"
      case .dependent: "by a dependent"
      case .onATask: "on a task"
      }
    }

    /// What the test calls `load()` on.
    func top(of view: AsyncLoadable<Int>) -> AsyncLoadable<Int> {
      switch self {
      case .caller: return view
      case .dependent: return view.map { $0 }
      case .onATask:
        view.loadOptions = LoadOptions()
        return view
      }
    }
  }

  /// Holds a loadable for a closure made before it.
  final class Holder: Sendable {
    let loadable = Mutex<AsyncLoadable<Int>?>(nil)
  }

  /// Cancelled after its source answered and while its transform runs, the attempt does not go on
  /// to load the loadable the transform returned: nothing waits for it, and nobody else wants it.
  @Test(arguments: Loader.allCases)
  func aCancelWhileTheTransformRunsKeepsTheInnerLoadFromStarting(loader: Loader) async throws {
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
    let statuses = Recorder<LoadStatus>()
    let observation = inner.observeLoadStatus { statuses.append($0) }
    let top = loader.top(of: view)
    let load = Task { try await top.load() }
    try await sourceControl.waitForStart()
    sourceControl.resolve(1)
    await #expect(throws: CancellationError.self) { try await load.outcome }
    #expect(innerControl.startCount == 0, "the inner loadable was asked to load by a cancelled attempt")
    #expect(inner.loadStatus == .notLoaded)
    #expect(!statuses.values.contains(.loading), "the inner loadable was started, then undone: \(statuses.values)")
    observation.cancel()
    holder.loadable.withLock { $0 = nil }
  }

  /// Joins `top`'s attempt from a `.high` task, and waits until the raise reached `view`'s: on a
  /// task the join raises that task; without one the raise reaches the attempt after the caller
  /// joined (its demand), and a test that went on before it would see it arrive by another way.
  func joinAtHighPriority(
    _ top: AsyncLoadable<Int>, of view: AsyncLoadable<Int>, _ loader: Loader
  ) async -> Task<Void, any Error> {
    let high = Task(priority: .high) { try await top.load() }
    await eventually { top.waiterCount == 2 }
    if loader != .onATask {
      await eventually { view.withState { $0.attempt?.context?.demand ?? .none } >= RawPriority(.high) }
    }
    return high
  }

  /// Cancelled after its source answered at once but before the task its transform runs on ran,
  /// the attempt runs no transform: its result would be dropped. (On a task, an attempt no longer
  /// current when its task begins runs nothing; a `map`'s checks as it goes on. Found by a second
  /// review of 1050cf2: the transform ran, and only the inner load was refused.)
  @Test(arguments: Loader.allCases)
  func aCancelBeforeTheTransformsTaskRanRunsNoTransform(loader: Loader) async throws {
    let transforms = Mutex(0)
    let inner = AsyncLoadable<Int>(content: 2)
    let view = AsyncLoadable<Int>(content: 1).flatMap { _ in
      transforms.withLock { $0 += 1 }
      return inner
    }
    let top = loader.top(of: view)
    let executor = ManualTaskExecutor()
    let outcome = Mutex<Result<Void, any Error>?>(nil)
    executor.spawn {
      do {
        try await top.load()
        outcome.withLock { $0 = .success(()) }
      } catch {
        outcome.withLock { $0 = .failure(error) }
      }
    }
    // The caller's task starts the attempt, which goes on on a task the executor holds.
    executor.runInOrder(maxSteps: 1)
    #expect(top.loadStatus == .loading && transforms.withLock { $0 } == 0)
    top.cancelLoad()
    executor.runInOrder()
    #expect(executor.pendingJobCount == 0)
    #expect(transforms.withLock { $0 } == 0, "the transform ran for a cancelled attempt")
    let told = outcome.withLock { $0.map { result in if case .failure(let error) = result { error is CancellationError } else { false } } }
    #expect(told == true, "the caller was not told of the cancel")
    #expect(view.content == nil)
  }

  /// Cancelled while it waits for the inner loadable, the attempt withdraws that wait, and the
  /// inner attempt, which only it wanted, is undone — whether the source answered at once (already
  /// loaded) or later.
  @Test(arguments: Loader.allCases, [true, false])
  func aCancelWhileItWaitsForTheInnerLoadableUndoesThatLoad(loader: Loader, sourceLoaded: Bool) async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceLoaded ? AsyncLoadable(content: 1) : sourceControl.makeLoadable()
    let innerControl = ControlledLoad<Int>()
    let inner = innerControl.makeLoadable()
    let view = source.flatMap { _ in inner }
    let top = loader.top(of: view)
    let load = Task { try await top.load() }
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

  /// An inner loadable whose `needsSync` cancels the `flatMap` when it is read the second time in
  /// one request: without a task, that read comes as the second wait's waiter joins, after the
  /// wait was installed.
  final class HookedInner: AsyncLoadable<Int>, @unchecked Sendable {
    let control: ControlledLoad<Int>
    let reads = Counter()
    let hook = Mutex<(@Sendable (Int) -> Void)?>(nil)
    init(control: ControlledLoad<Int>) {
      self.control = control
      super.init()
    }
    override var needsSync: Bool {
      hook.withLock { $0 }?(reads.increment())
      return super.needsSync
    }
    override func performLoad() async throws -> Int { try await control.operation() }
  }

  /// A cancel that comes while the second wait's waiter joins the inner loadable (the wait is
  /// installed, the waiter not yet added) still withdraws that waiter once it is: the inner
  /// attempt, which only the cancelled `flatMap` wanted, is undone. (From the review: the cancel
  /// found no waiter to withdraw, and the inner load ran on.) On a task the second read never
  /// comes, and the cancel is made once the inner loads: the case above.
  @Test(arguments: Loader.allCases)
  func aCancelWhileTheInnerWaitJoinsStillUndoesTheInnerAttempt(loader: Loader) async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let innerControl = ControlledLoad<Int>()
    let inner = HookedInner(control: innerControl)
    let view = source.flatMap { _ in inner }
    let hookCancelled = Mutex(false)
    inner.hook.withLock {
      $0 = { read in
        guard read == 2 else { return }
        hookCancelled.withLock { $0 = true }
        view.cancelLoad()
      }
    }
    let top = loader.top(of: view)
    let load = Task { try await top.fetchIfNeeded() }
    try await sourceControl.waitForStart()
    sourceControl.resolve(1)
    // Without a task the hook cancels as the waiter joins (the inner attempt is then undone before
    // or after its task starts); on a task the cancel is made once the inner loads.
    await eventually { hookCancelled.withLock { $0 } || innerControl.startCount > 0 }
    if !hookCancelled.withLock({ $0 }) { view.cancelLoad() }
    await #expect(throws: CancellationError.self) { try await load.outcome }
    await eventually { inner.loadStatus == .notLoaded }
    #expect(inner.loadStatus == .notLoaded, "the inner attempt only the cancelled flatMap wanted kept running")
    #expect(innerControl.pendingCount == 0)
    inner.hook.withLock { $0 = nil }
  }

  /// Asked if needed, an inner loadable that is refreshing answers at once with the content it
  /// has, as a request if needed does (SPEC §1). (From the review: the second wait took it for a
  /// source, and waited for the refresh.)
  @Test(arguments: Loader.allCases)
  func ifNeededTheInnersContentIsTakenAtOnceWhileItRefreshes(loader: Loader) async throws {
    let innerControl = ControlledLoad<Int>()
    let inner = innerControl.makeLoadable()
    inner.sync()
    try await innerControl.waitForStart()
    innerControl.resolve(10)
    await eventually { inner.loadStatus == .loaded }
    inner.sync()  // a refresh; its content, 10, is kept meanwhile
    try await innerControl.waitForStart(2)
    #expect(inner.loadStatus == .loading && !inner.needsSync)
    let view = AsyncLoadable(content: 1).flatMap { _ in inner }
    let top = loader.top(of: view)
    let fetch = Task { try await top.fetchIfNeeded() }
    #expect(try await fetch.outcome == 10)
    #expect(view.content == 10)
    innerControl.resolve(20)
  }

  /// A caller of higher priority who joins while the transform runs raises the attempt between
  /// its two waits: the raise goes on to the second, the inner loadable's attempt. (On a task, the
  /// attempt's task is raised, and the inner load is asked for from it.)
  @Test(arguments: Loader.allCases, [true, false])
  func aPriorityRaisedWhileTheTransformRunsReachesTheInnerLoad(loader: Loader, sourceLoaded: Bool) async throws {
    let seen = UpstreamDemandTests.Seen()
    let sourceControl = ControlledLoad<Int>()
    let source = sourceLoaded ? AsyncLoadable(content: 1) : sourceControl.makeLoadable()
    let inner = AsyncLoadable<Int> {
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
    let top = loader.top(of: view)
    // The transform blocks the thread it runs on: the loads run on a queue of their own, never on
    // a thread of the cooperative pool.
    let executor = QueueExecutor()
    let low = Task(executorPreference: executor, priority: .background) {
      try await TaskLaunch.executor.withValue(executor) { try await top.load() }
    }
    if !sourceLoaded {
      try await sourceControl.waitForStart()
      sourceControl.resolve(1)
    }
    try await inTransform.waitForStart()
    let high = Task(priority: .high) { try await top.load() }
    await eventually { top.waiterCount == 2 }
    release.signal()
    try await high.outcome
    try await low.outcome
    #expect(top.content == 2)
    let priority = try #require(seen["inner"])
    #expect(priority >= .high, "the inner loadable ran at \(priority)")
  }

  /// A more urgent caller joins while the attempt still waits for its source: the raise reaches
  /// the source, and after it the transform and the inner load run at it — as on a task, which the
  /// joining caller raised. (Found by a second review of 1050cf2: without a task, the transform
  /// ran at the starting call's priority, and the inner load was never raised — for a dependent's
  /// attempt before 1050cf2 too.)
  @Test(arguments: Loader.allCases)
  func aPriorityRaisedWhileTheSourceLoadsReachesTheInnerLoad(loader: Loader) async throws {
    let seen = UpstreamDemandTests.Seen()
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let inner = AsyncLoadable<Int> {
      await waitUntilRaised(to: .high)
      seen.record("inner")
      return 2
    }
    let view = source.flatMap { _ in inner }
    let top = loader.top(of: view)
    let low = Task(priority: .background) { try await top.load() }
    try await sourceControl.waitForStart()
    let high = await joinAtHighPriority(top, of: view, loader)
    sourceControl.resolve(1)
    try await high.outcome
    try await low.outcome
    #expect(top.content == 2)
    let priority = try #require(seen["inner"])
    #expect(priority >= .high, "the inner loadable ran at \(priority)")
  }

  /// The source answered inside the starting call, so the transform goes on on a task of its own;
  /// a more urgent caller joins before that task ran: the raise reaches that task, and the
  /// transform runs at it, as a `map`'s step does — not only the inner load after it.
  @Test(arguments: Loader.allCases)
  func aPriorityRaisedBeforeTheTransformsTaskRanRaisesThatTask(loader: Loader) async throws {
    let transformPriority = Mutex<TaskPriority?>(nil)
    let view = AsyncLoadable<Int>(content: 1).flatMap { value in
      transformPriority.withLock { $0 = Task.currentPriority }
      return AsyncLoadable<Int>(content: value + 1)
    }
    let top = loader.top(of: view)
    let executor = ManualTaskExecutor()
    let low = Task(executorPreference: executor, priority: .background) {
      try await TaskLaunch.executor.withValue(executor) { try await top.load() }
    }
    // The starting call runs: the source answers at once, and the step waits on the executor.
    await eventually { executor.pendingJobCount > 0 }
    executor.runInOrder(maxSteps: 1)
    #expect(top.loadStatus == .loading && transformPriority.withLock { $0 } == nil)
    let high = await joinAtHighPriority(top, of: view, loader)
    executor.runInOrder()
    try await high.outcome
    try await low.outcome
    #expect(top.content == 2)
    let priority = try #require(transformPriority.withLock { $0 })
    #expect(priority >= .high, "the transform ran at \(priority)")
  }

  /// The source's content delivered by somebody's synchronous call (a `ContentLoader` key
  /// written): the transform does not run inside that call — none of the writer's task-locals —
  /// and the inner load runs at the attempt's priority, not the writer's. (From the review.)
  @Test(arguments: Loader.allCases)
  func aWriteToAKeyedSourceDoesNotRunTheTransformInTheWritersCall(loader: Loader) async throws {
    let seen = UpstreamDemandTests.Seen()
    let traces = Recorder<String>()
    let control = ControlledLoad<Int>()
    let keys = ContentLoader<String, Int, Int> { _ in
      let value = try await control.operation()
      return (value, value)
    }
    let source = keys.loadable(for: "k")
    let inner = AsyncLoadable<Int> {
      await waitUntilRaised(to: .high)
      seen.record("inner")
      return 2
    }
    let view = source.flatMap { _ in
      traces.append(CallerTrace.id ?? "none")
      return inner
    }
    let top = loader.top(of: view)
    let load = Task(priority: .high) { try await top.load() }
    try await control.waitForStart()
    await Task(priority: .background) {
      CallerTrace.$id.withValue("writer") { _ = keys.set(1, version: 1, for: "k") }
    }.value
    try await load.outcome
    #expect(view.content == 2)
    #expect(traces.values == ["none"], "the transform ran inside the writer's call, with its task-locals")
    let priority = try #require(seen["inner"])
    #expect(priority >= .high, "the inner loadable ran at \(priority), the writer's priority")
  }

  /// Its source's attempt ended on a task the library started for it, which binds no caller's
  /// task-locals: the transform runs there, right where the source's waiters are resumed, as a
  /// `map`'s does — not on a task of its own (one task less a portal item of a map's graph, #28).
  /// Whether or not the transform returns a loaded loadable; whether a caller or a dependent
  /// started the attempt (a caller's ran on a task of its own until #28's second step).
  @Test(arguments: Loader.withoutTask, [false, true])
  func theTransformRunsOnTheTaskItsSourcesAttemptEndedOn(loader: Loader, innerLoaded: Bool) async throws {
    let tasks = Mutex<[String: UInt]>([:])
    let source = AsyncLoadable<Int> {
      tasks.withLock { $0["source"] = currentTaskIdentity() }
      return 1
    }
    let view = source.flatMap { value in
      tasks.withLock { $0["transform"] = currentTaskIdentity() }
      return innerLoaded ? AsyncLoadable(content: value + 1) : AsyncLoadable { value + 1 }
    }
    let top = loader.top(of: view)
    try await top.load()
    #expect(top.content == 2)
    let (sourceTask, transformTask) = tasks.withLock { ($0["source"], $0["transform"]) }
    #expect(sourceTask != nil && sourceTask != 0)
    #expect(transformTask == sourceTask, "the transform ran on a task of its own")
  }

  /// The source's attempt runs at a higher priority than this one (a more urgent caller started
  /// it): the transform does not run on that task, and the inner loadable is asked for at this
  /// attempt's priority, as on a task of its own — not raised to the source's.
  @Test(arguments: Loader.withoutTask)
  func theInnerLoadIsAskedForAtTheAttemptsPriorityNotTheSourceTasks(loader: Loader) async throws {
    let seen = UpstreamDemandTests.Seen()
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let inner = AsyncLoadable<Int> {
      seen.record("inner")
      return 2
    }
    let view = source.flatMap { _ in inner }
    let top = loader.top(of: view)
    let high = Task(priority: .high) { try await source.load() }
    try await sourceControl.waitForStart()
    let low = Task(priority: .background) { try await top.load() }
    await eventually { source.waiterCount == 2 }
    sourceControl.resolve(1)
    try await low.outcome
    try await high.outcome
    #expect(top.content == 2)
    let priority = try #require(seen["inner"])
    #expect(priority < .high, "the inner loadable ran at \(priority), the source's priority")
  }

  /// The transform runs on no task of the caller's, even when the source is loaded and the
  /// attempt could have gone on inside the call that started it.
  @Test(arguments: Loader.allCases, [false, true])
  func theTransformSeesNoTaskLocalOfTheCaller(loader: Loader, joined: Bool) async throws {
    let seen = Recorder<String>()
    let source = AsyncLoadable(content: 1)
    let inner = AsyncLoadable(content: 2)
    let view: AsyncLoadable<Int> =
      joined
      ? source.joined { _ in
        seen.append(CallerTrace.id ?? "none")
        return inner
      }.map { $0.0 + $0.1 }
      : source.flatMap { _ in
        seen.append(CallerTrace.id ?? "none")
        return inner
      }
    let top = loader.top(of: view)
    try await CallerTrace.$id.withValue("load") { try await top.load() }
    #expect(top.content == (joined ? 3 : 2))
    #expect(seen.values == ["none"])
  }

  /// The loadable the transform returned waits for the `flatMap` itself: the second wait closes a
  /// cycle, and both fail with ``LoadableError/dependencyCycle`` instead of waiting for each other.
  @Test(arguments: Loader.allCases)
  func anInnerLoadableThatWaitsForTheFlatMapIsACycle(loader: Loader) async throws {
    let source = AsyncLoadable { 1 }
    let holder = Holder()  // the inner loadable, reached weakly enough to be freed afterwards
    let view = source.flatMap { _ in holder.loadable.withLock { $0 }! }
    let inner = AsyncLoadable { 2 }
    inner.addDependency(view)
    holder.loadable.withLock { $0 = inner }
    let top = loader.top(of: view)
    let load = Task { try await top.load() }
    await #expect(throws: LoadableError.dependencyCycle) { try await load.outcome }
    #expect(inner.loadStatus == .failed)
    holder.loadable.withLock { $0 = nil }
  }

  /// The source's failure, the transform's error and the inner loadable's failure end the
  /// attempt, as on a task.
  @Test(arguments: Loader.allCases)
  func theSourcesFailureAndTheTransformsErrorEndTheAttempt(loader: Loader) async throws {
    let failing = AsyncLoadable<Int> { throw Boom(code: 1) }.flatMap { _ in AsyncLoadable(content: 2) }
    await #expect(throws: Boom(code: 1)) { try await loader.top(of: failing).load() }
    let throwing = AsyncLoadable { 1 }.flatMap { _ -> AsyncLoadable<Int> in throw Boom(code: 2) }
    await #expect(throws: Boom(code: 2)) { try await loader.top(of: throwing).load() }
    let innerFails = AsyncLoadable { 1 }.flatMap { _ in AsyncLoadable<Int> { throw Boom(code: 3) } }
    await #expect(throws: Boom(code: 3)) { try await loader.top(of: innerFails).load() }
  }

  /// A cancel from the source's observer, before the attempt has a driver: the completion handler
  /// of the call that started it runs after that call returned (SPEC §1). (From the review: begun
  /// without a task, inside the call, the attempt ended there. An attempt a caller starts runs on
  /// a task again.)
  @Test func aCancelFromASourceObserverDoesNotCallTheCompletionInsideTheCall() async throws {
    let sourceControl = ControlledLoad<Int>()
    let source = sourceControl.makeLoadable()
    let view = source.flatMap { _ in AsyncLoadable(content: 2) }
    let observation = source.observeLoadStatus { status in
      if status == .loading { view.cancelLoad() }
    }
    let calls = Recorder<String>()
    CallerTrace.$id.withValue("inside") {
      view.load { error in calls.append("\(CallerTrace.id ?? "outside") \(error.map { "\(type(of: $0))" } ?? "nil")") }
    }
    await eventually { calls.count == 1 }
    #expect(calls.values == ["outside CancellationError"])
    observation.cancel()
    await eventually { source.loadStatus != .loading }
    sourceControl.resolve(1)
  }
}
