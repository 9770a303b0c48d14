@testable import LoadableKit
import Dispatch
import LoadableKitTesting
import Synchronization
import Testing

/// A task-local a caller binds: a trace context, a request's logger or credentials.
enum CallerTrace {
  @TaskLocal static var id: String?
}

/// A job whose work reports the task-local it sees.
struct TraceWork: JobWork {
  static var kind: String { "trace" }
  func run(in context: JobContext<Int>) async throws -> String { CallerTrace.id ?? "none" }
}

/// SPEC §1: an attempt is shared, so the task that runs it inherits no task-local values from the
/// caller, claim or dependent that started it; SPEC §5: nor does a key's load.
@Suite("Attempts inherit no task-locals", .timeLimit(.minutes(1)))
struct AttemptTaskLocalTests {
  /// A loader whose keys' loads wait for `control`; a key's version is its value.
  static func keys(loadingWith control: ControlledLoad<Int>) -> ContentLoader<String, Int, Int> {
    ContentLoader { _ in
      let value = try await control.operation()
      return (value, value)
    }
  }

  @Test func aKeysLoadSeesNoTaskLocalOfTheClaimThatStartedIt() async throws {
    let seen = Recorder<String>()
    let loader = Loader(idleTimeout: nil) { _ in
      seen.append(CallerTrace.id ?? "none")
      return ("v", 1)
    }
    let claim = CallerTrace.$id.withValue("claim") { loader.begin(1) }
    await eventually { claim.snapshot.status == .loaded }
    CallerTrace.$id.withValue("refresh") { loader.refresh(1) }
    await eventually { seen.count == 2 }
    #expect(seen.values == ["none", "none"])
    claim.end()
  }

  /// The one order of effects runs a job's observers outside any attempt, as a loadable's: a job
  /// started from inside `performLoad()` does not call its status handler as part of that
  /// attempt (whose loads would then count as the attempt's dependencies).
  @Test func aJobStartedInsideAnAttemptTellsItsObserversOutsideIt() async throws {
    let observerInsideAnAttempt = Recorder<Bool>()
    let handlerInsideAnAttempt = Recorder<Bool>()
    let job = Job(TraceWork())
    job.addObserver { delivery in
      if case .event(.status) = delivery { observerInsideAnAttempt.append(AttemptContext.current != nil) }
    }
    let loadable = AsyncLoadable { () async -> Int in
      // The status change is delivered to the observer above by this call's effects; the new
      // handler's first status, when it is added.
      _ = job.start(statusHandler: { _ in handlerInsideAnAttempt.append(AttemptContext.current != nil) }) { _ in }
      return 1
    }
    try await loadable.load()
    _ = try await job.output
    #expect(!observerInsideAnAttempt.values.isEmpty)
    #expect(observerInsideAnAttempt.values.allSatisfy { !$0 })
    #expect(!handlerInsideAnAttempt.values.isEmpty)
    #expect(handlerInsideAnAttempt.values.allSatisfy { !$0 })
  }

  /// A job released inside `performLoad()` ends its observers outside that attempt too.
  @Test func aJobReleasedInsideAnAttemptEndsItsObserversOutsideIt() async throws {
    let ends = Recorder<Bool>()
    let loadable = AsyncLoadable { () async -> Int in
      let job = Job(TraceWork())
      job.addObserver { delivery in
        if case .end = delivery { ends.append(AttemptContext.current != nil) }
      }
      _ = consume job  // never started: its deinit ends the observer, here
      return 1
    }
    try await loadable.load()
    #expect(ends.values == [false])
  }

  /// The same write made by a live view's transform (a loaded `map` recomputed as its source's
  /// content changed), told past the trampoline's depth, where a long chain's refresh ends on its
  /// root's task: queued, it runs where that end runs. Each live view writes a key of its own,
  /// which a `map` waits for.
  @Test func aWriteFromALiveViewToldPastTheTrampolinesDepthDoesNotRunAMapsTransformInIt() async throws {
    let traces = Recorder<String>()
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let refreshes = Mutex(0)
    let root = AsyncLoadable { () -> Int in refreshes.withLock { $0 } }
    var chain = [root]
    for _ in 0..<60 { chain.append(chain.last!.map { $0 }) }
    // A live view over every node past the 20th, which writes its key when the refresh reaches
    // it; a `map` over each key, loading.
    let views = chain[20...].enumerated().map { index, node in
      node.map { value -> Int in
        if value == 1 { CallerTrace.$id.withValue("a live view") { _ = keys.set(1, version: 1, for: "k\(index)") } }
        return value
      }
    }
    let waiting = views.indices.map { index in
      keys.loadable(for: "k\(index)").map { value in
        traces.append(CallerTrace.id ?? "none")
        return value + 1
      }
    }
    let loads = waiting.map { view in Task { try await view.load() } }
    try await control.waitForStart(waiting.count)
    for view in views { try await view.load() }
    refreshes.withLock { $0 = 1 }
    _ = try await chain.last!.fetch()
    for load in loads { try await load.value }
    #expect(waiting.allSatisfy { $0.content == 2 })
    #expect(traces.values == Array(repeating: "none", count: waiting.count), "a transform ran inside a live view's call")
  }

  /// The same write made by a cancellation handler whose task's cancel was queued past the
  /// trampoline's depth: a failure climbing a long chain on its root's task reaches a `zip`, which
  /// fails fast and cancels its other input's task there. Queued work runs as it would have run
  /// in place. (Chains of every length in a range: where the cancel lands in the trampoline's
  /// depth depends on it.)
  @Test func aCancelQueuedPastTheTrampolinesDepthRunsItsHandlersAsUserCode() async throws {
    for length in 20..<72 {
      try await expectNoTransformInside("a queued cancellation handler") { write in
        let root = ControlledLoad<Int>()
        let slow = ControlledLoad<Int>()
        var chain = root.makeLoadable()
        for _ in 0..<length { chain = chain.map { $0 } }
        let zipped = zip(
          chain,
          AsyncLoadable { try await withTaskCancellationHandler { try await slow.operation() } onCancel: { write() } })
        let load = Task { try await zipped.load() }
        try await root.waitForStart()
        try await slow.waitForStart()
        root.fail(Boom(code: length))
        await #expect(throws: Boom(code: length)) { try await load.value }
      }
    }
  }

  /// Instruments are user code, told as observers are: outside any attempt — also when told
  /// inside one (a retry, told inside the attempt's work; a dependency's start and a claim's
  /// begin and end, made inside the attempt) —, so that a load an instrument makes is no
  /// dependency of it.
  @Test func anInstrumentIsToldOutsideAnyAttempt() async throws {
    let told = Recorder<String>()
    let instrument = TellsWhereItIsTold(told: told)
    let child = AsyncLoadable { 1 }
    child.instrument = instrument
    let keys = ContentLoader<String, Int, Int>(name: "keys", instrument: instrument) { _ in (1, 1) }
    let tries = Mutex(0)
    let parent = AsyncLoadable { () async throws -> Int in
      guard tries.withLock({ tries in
        tries += 1
        return tries > 1
      }) else { throw Boom(code: 1) }
      keys.begin("k").end()
      try await child.load()
      return (child.content ?? 0) + 1
    }
    parent.loadOptions = LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .zero, jitter: 0))
    parent.instrument = instrument
    try await parent.load()
    #expect(parent.content == 2)
    #expect(
      Set(told.values) == ["started outside", "retrying outside", "ended outside", "claimBegan outside", "claimEnded outside"])
  }

  /// A user value that a call inside `performLoad()` lets go of (a key's value its write
  /// replaced, released with the write's effects) is released outside that attempt too: its
  /// `deinit`'s loads are no dependencies of it.
  @Test func aValueReleasedInsideAnAttemptIsReleasedOutsideIt() async throws {
    let insideAnAttempt = Recorder<Bool>()
    let keys = ContentLoader<String, WritesWhenReleased, Int> { _ in throw CancellationError() }
    _ = keys.set(WritesWhenReleased { insideAnAttempt.append(AttemptContext.current != nil) }, version: 1, for: "k")
    let loadable = AsyncLoadable { () async -> Int in
      _ = keys.set(WritesWhenReleased {}, version: 2, for: "k")  // lets the first value go, in this call
      return 1
    }
    try await loadable.load()
    #expect(insideAnAttempt.values == [false])
  }

  /// A `map`'s transform runs where its source's attempt ends, without a task of its own: on that
  /// attempt's task. When a writer's synchronous call ends the source's attempt instead (a
  /// `ContentLoader` key written while it loads), the transform does not run inside that call,
  /// with the writer's task-locals — for a `map`, a `map` over a `zip` (whose combination ends
  /// there too), and a chain of two.
  @Test(arguments: ["map", "zip", "map chain"])
  func aWriteToAKeyedSourceDoesNotRunAMapsTransformInTheWritersCall(shape: String) async throws {
    let traces = Recorder<String>()
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let source = keys.loadable(for: "k")
    @Sendable func traced(_ value: Int) -> Int {
      traces.append(CallerTrace.id ?? "none")
      return value + 1
    }
    let view: AsyncLoadable<Int> =
      switch shape {
      case "zip": zip(source, AsyncLoadable(content: 10)).map { traced($0.0 + $0.1) }
      case "map chain": source.map { $0 * 2 }.map(traced)
      default: source.map(traced)
      }
    let load = Task { try await view.load() }
    try await control.waitForStart()
    CallerTrace.$id.withValue("writer") { _ = keys.set(1, version: 1, for: "k") }
    try await load.value
    #expect(view.content == (shape == "zip" ? 12 : shape == "map chain" ? 3 : 2))
    #expect(traces.values == ["none"], "the transform ran inside the writer's call, with its task-locals")
  }

  /// The write that sends a loading `map` on to a task of its own keeps the order of the key's
  /// waiters: those that registered after the `map`'s wait are resumed after the `map` ended, on
  /// that task, each of them, in the order they registered, and find it loaded (the ThreadSafety
  /// guide: a caller that returns finds `map` results current). The write's own call returns
  /// before (the transform may not run inside it). (From the review; with three waiters, since
  /// a loop over them stopped after the first passed with one: mutant 91.)
  @Test(arguments: [1, 3])
  func theKeysLaterWaitersFindAMapThatAWriteSentToATaskLoaded(waiters: Int) async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let source = keys.loadable(for: "k")
    let view = source.map { $0 + 1 }
    let load = Task { try await view.load() }
    try await control.waitForStart()  // the map's wait is the key's first waiter
    let seen = Recorder<String>()
    for index in 1...waiters {
      source.load { _ in seen.append("\(index): \(view.loadStatus) \(view.content.map { "\($0)" } ?? "nil")") }
    }
    _ = keys.set(1, version: 1, for: "k")
    try await load.value
    await eventually { seen.count == waiters }
    #expect(seen.values == (1...waiters).map { "\($0): loaded 2" })
  }

  /// The same when the write comes while the call that started the `map`'s attempt has not yet
  /// returned from beginning its wait: the wait has joined the key's attempt, whose start an
  /// instrument holds on that call's thread, and the write answers it on the test's. Only an
  /// outcome decided on the starting call's own thread is one decided inside that call; this one
  /// keeps the waiters' order. For a `map`, and a `map` over a `zip` whose other source is loaded
  /// (the `zip` is decided by the write). (A fresh-clone run under ThreadSanitizer found the
  /// window by chance: the later waiter saw the `map` loading.)
  @Test(arguments: ["map", "zip"])
  func aWriteWhileTheStartingCallStillBeginsTheWaitKeepsTheWaitersOrder(shape: String) async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let source = keys.loadable(for: "k")
    let holding = HoldingInstrument()
    source.instrument = holding
    let view: AsyncLoadable<Int> =
      shape == "zip" ? zip(AsyncLoadable(content: 10), source).map { $0.0 + $0.1 } : source.map { $0 + 1 }
    // The starting call blocks a thread in the instrument: on a queue of its own, not the pool's.
    let executor = QueueExecutor()
    let load = Task(executorPreference: executor) {
      try await TaskLaunch.executor.withValue(executor) { try await view.load() }
    }
    await eventually { holding.isHolding }  // the view's wait joined the key's attempt
    let seen = Recorder<String>()
    for index in 1...2 {
      source.load { _ in seen.append("\(index): \(view.loadStatus) \(view.content.map { "\($0)" } ?? "nil")") }
    }
    _ = keys.set(1, version: 1, for: "k")
    holding.release()
    try await load.value
    await eventually { seen.count == 2 }
    let content = shape == "zip" ? 11 : 2
    #expect(seen.values == ["1: loaded \(content)", "2: loaded \(content)"])
  }

  /// The task a low-priority writer's call sends a `map`'s attempt on to runs at the attempt's
  /// demand — the priority of the caller that started it, or of one that joined since — not at the
  /// writer's (SPEC §1: an attempt's priority is set explicitly). (From the second review.)
  @Test(arguments: [false, true])
  func aMapThatAWriteSentToATaskRunsAtItsCallersPriority(raisedByAJoiningCaller: Bool) async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let seen = Recorder<TaskPriority>()
    let view = keys.loadable(for: "k").map { value -> Int in
      seen.append(Task.currentPriority)
      return value + 1
    }
    let load = Task(priority: raisedByAJoiningCaller ? .background : .high) { try await view.load() }
    try await control.waitForStart()  // the map's wait is the key's first waiter
    let high = Task(priority: .high) { try await view.load() }
    await eventually { view.waiterCount == 2 }
    // The raise reaches the attempt's context after the caller joined: the write comes once it has.
    await eventually { view.withState { $0.attempt?.context?.demand ?? .none } >= RawPriority(.high) }
    // Not awaited: an await of its value would raise the writer's priority to this test's.
    Task.detached(priority: .background) { _ = keys.set(1, version: 1, for: "k") }
    try await load.value
    try await high.value
    #expect(view.content == 2)
    #expect(seen.values == [.high], "the transform ran at the writer's priority")
  }

  /// The same for a `zip`, whose attempt a dependency group drives: a raise passed down to it by a
  /// caller that joined after it started is its demand too. (It was not recorded: the `zip` went
  /// on at its starter's priority, and the `map` over it with it.)
  @Test func aZipThatAWriteSentToATaskRunsAtAJoiningCallersPriority() async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let seen = Recorder<TaskPriority>()
    // The other input loaded first: the write's answer is the one that decides the `zip`. (Had
    // the other input's attempt ended, without having resumed its waiters, while the raise came,
    // the raise would stop there — a window not closed — and the `zip` go on where that input's
    // task resumed it, after the write.)
    let ten = AsyncLoadable { 10 }
    try await ten.load()
    let zipped = zip(keys.loadable(for: "k"), ten)
    let view = zipped.map { pair -> Int in
      seen.append(Task.currentPriority)
      return pair.0 + pair.1
    }
    let load = Task(priority: .background) { try await view.load() }
    try await control.waitForStart()
    let high = Task(priority: .high) { try await view.load() }
    await eventually { view.waiterCount == 2 }
    // The raise goes from the `map`'s attempt down to the `zip`'s; the write comes once it is there.
    await eventually { zipped.withState { $0.attempt?.context?.demand ?? .none } >= RawPriority(.high) }
    Task.detached(priority: .background) { _ = keys.set(1, version: 1, for: "k") }
    try await load.value
    try await high.value
    #expect(view.content == 11)
    #expect(seen.values == [.high], "the zip went on at its starter's priority")
  }

  /// A raise that reaches a `map`'s attempt after a write sent it on to a task, before that task
  /// ran, raises that task: the transform runs at the raised priority. (It ran at the priority the
  /// task was started at.) On a test executor, so that the task waits while the raise comes.
  /// (With a later waiter on the key, the `map` goes on on the task that resumes that waiter.)
  @Test(arguments: ["map", "zip", "map, a later waiter"])
  func aRaiseAfterAWriteSentAnAttemptToATaskRaisesThatTask(shape: String) async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let seen = Recorder<TaskPriority>()
    let key = keys.loadable(for: "k")
    let zipped = zip(key, AsyncLoadable { 0 })
    @Sendable func record(_ value: Int) -> Int {
      seen.append(Task.currentPriority)
      return value + 1
    }
    // With a `zip`, its attempt is the one the write sends on; the raise goes down to it from the
    // `map` over it.
    let view = shape == "zip" ? zipped.map { record($0.0 + $0.1) } : key.map(record)
    let sentOnDemand = {
      shape != "zip"
        ? view.withState { $0.attempt?.context?.demand ?? .none }
        : zipped.withState { $0.attempt?.context?.demand ?? .none }
    }
    let executor = ManualTaskExecutor()
    @Sendable func start(_ priority: TaskPriority, _ operation: @escaping @Sendable () async -> Void) {
      TaskLaunch.executor.withValue(executor) { _ = Task(executorPreference: executor, priority: priority, operation: operation) }
    }
    start(.background) { try? await view.load() }
    _ = executor.runInOrder()
    #expect(control.startCount == 1)
    if shape == "map, a later waiter" {
      start(.background) { try? await key.load() }
      _ = executor.runInOrder()
      #expect(key.waiterCount == 2)
    }
    start(.background) { _ = keys.set(1, version: 1, for: "k") }
    _ = executor.runInOrder(maxSteps: 1)  // the write: the attempt goes on on a task, not run yet
    #expect(sentOnDemand() == RawPriority(.background))
    #expect(seen.values.isEmpty)
    view.escalateRunningAttempt(to: .high)
    _ = executor.runInOrder()
    #expect(view.content == 2)
    #expect(seen.values == [.high], "the task the attempt went on on ran at the priority it was started at")
    control.resolve(0)
    _ = executor.runInOrder()
  }

  /// A `cancelLoad()` between the write that sent a `map`'s attempt on to a task and that task:
  /// the attempt ends cancelled, and its transform does not run for it, nor records what it
  /// derived from. (From the review: it ran, after `cancelLoad()` returned.) Run on a test
  /// executor, so that the task runs once the write and the cancel have returned.
  @Test func aMapAttemptCancelledBeforeItsTaskRanRunsNoTransform() async throws {
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let runs = Recorder<Int>()
    let view = keys.loadable(for: "k").map { value -> Int in
      runs.append(value)
      return value + 1
    }
    let calls = Recorder<String>()
    let executor = ManualTaskExecutor()
    _ = executor.spawn { view.load { error in calls.append(error.map { "\(type(of: $0))" } ?? "nil") } }
    _ = executor.runInOrder()
    #expect(control.startCount == 1)
    _ = executor.spawn {
      _ = keys.set(1, version: 1, for: "k")
      view.cancelLoad()
    }
    _ = executor.runInOrder()
    #expect(calls.values == ["CancellationError"])
    #expect(view.loadStatus == .failed)
    #expect(runs.values.isEmpty, "the transform ran for a cancelled attempt")
    // Retried, it derives from the key's content: nothing recorded says it already did.
    _ = executor.spawn { view.retryLoad { _ in } }
    _ = executor.runInOrder()
    #expect(view.content == 2)
    #expect(runs.values == [1])
    control.resolve(0)
    _ = executor.runInOrder()
  }

  /// A `map` over a key whose load waits, loading; then `writes` answers that load, from the user
  /// code under test, with `write()`: a write made inside a task-local that `trace` names. The
  /// `map` must load, its transform seeing no task-local.
  func expectNoTransformInside(
    _ trace: String, _ writes: (_ write: @escaping @Sendable () -> Void) async throws -> Void
  ) async throws {
    let traces = Recorder<String>()
    let control = ControlledLoad<Int>()
    let keys = Self.keys(loadingWith: control)
    let view = keys.loadable(for: "k").map { value in
      traces.append(CallerTrace.id ?? "none")
      return value + 1
    }
    let load = Task { try await view.load() }
    try await control.waitForStart()
    try await writes { CallerTrace.$id.withValue(trace) { _ = keys.set(1, version: 1, for: "k") } }
    try await load.value
    #expect(view.content == 2)
    #expect(traces.values == ["none"], "the transform ran inside \(trace)'s call, with its task-locals")
  }

  /// The same write made by an observer or a completion handler of another loadable, as that
  /// loadable's attempt ends on its own task, inside a task-local the callback binds: a callback is
  /// user code, and the `map`'s transform does not run inside its call either.
  @Test(arguments: ["an observer", "a completion handler"])
  func aWriteFromACallbackAtAnAttemptsEndDoesNotRunAMapsTransformInIt(callback: String) async throws {
    try await expectNoTransformInside(callback) { write in
      let other = AsyncLoadable { 7 }
      let observation = other.observeLoadStatus { status in
        if callback == "an observer", status == .loaded { write() }
      }
      if callback == "a completion handler" {
        other.load { _ in write() }
      } else {
        try await other.load()
      }
      observation.cancel()
    }
  }

  /// The same write made by another `map`'s or a `flatMap`'s transform, which runs where its
  /// source's attempt ended on its task, by the `deinit` of a value an attempt's end lets go of
  /// there (the content a `map`'s refresh replaced, the loadable a `flatMap`'s refresh replaced,
  /// the content a `zip` was delivered that changed since), or by a task's cancellation handler
  /// that a cancel there runs: a transform, a `deinit` and a cancellation handler are user code too.
  @Test(arguments: [
    "a map's transform", "a flatMap's transform", "a map's replaced content", "a flatMap's replaced loadable",
    "a cancellation handler", "a zip's delivered content", "a joined's kept source content",
    "an instrument's attemptEnded", "an instrument's attemptStarted",
  ])
  func aWriteFromUserCodeRunAtAnAttemptsEndDoesNotRunAMapsTransformInIt(writer: String) async throws {
    try await expectNoTransformInside(writer) { write in
      let source = AsyncLoadable { () -> Int in 0 }
      // For the replaced values: the first one writes when it is let go of.
      let first = Mutex(true)
      @Sendable func writesWhenReleasedIfFirst() -> WritesWhenReleased {
        let isFirst = first.withLock { first in
          defer { first = false }
          return first
        }
        return WritesWhenReleased { if isFirst { write() } }
      }
      switch writer {
      case "a map's transform":
        let other = source.map { value -> Int in
          write()
          return value
        }
        try await other.load()
      case "a flatMap's transform":
        let other = source.flatMap { value -> AsyncLoadable<Int> in
          write()
          return AsyncLoadable { value }
        }
        try await other.load()
      case "a map's replaced content":
        // The refresh ends on the task of its source's refresh, and lets the content go there.
        let other = source.map { _ in writesWhenReleasedIfFirst() }
        try await other.load()
        other.sync()
      case "a cancellation handler":
        // A `zip` fails fast as one input fails on its task: the other input's attempt, which only
        // the `zip` wanted, is cancelled there, and its task's cancellation handler runs at once.
        let slow = ControlledLoad<Int>()
        let failing = ControlledLoad<Int>()
        let other = zip(
          AsyncLoadable { try await withTaskCancellationHandler { try await slow.operation() } onCancel: { write() } },
          failing.makeLoadable())
        let load = Task { try await other.load() }
        try await slow.waitForStart()
        try await failing.waitForStart()
        failing.fail(Boom(code: 1))
        await #expect(throws: Boom(code: 1)) { try await load.value }
      case "a zip's delivered content":
        // The `zip` over two keys gets the first one's content at once (loaded), the second's
        // where its load ends, on its task; a `map` over the `zip` replaces the first one's
        // content there (a write of its key), so that the `zip` recomputes and lets the first
        // content go, but for the delivery it combined, let go of after the `zip`'s end.
        let sources = ContentLoader<String, WritesWhenReleased, Int> { key in
          (key == "a" ? writesWhenReleasedIfFirst() : WritesWhenReleased {}, 1)
        }
        try await sources.loadable(for: "a").load()
        let other = zip(sources.loadable(for: "a"), sources.loadable(for: "b")).map { _ -> Int in
          _ = sources.set(WritesWhenReleased {}, version: 2, for: "a")
          return 0
        }
        try await other.load()
      case "a joined's kept source content":
        // `joined` keeps its source's content for its result while its inner loadable loads; the
        // source's content is replaced meanwhile, and the inner loadable fails on its task: the
        // attempt lets the kept content go there (its last reference).
        let sources = ContentLoader<String, WritesWhenReleased, Int> { _ in (writesWhenReleasedIfFirst(), 1) }
        let inner = ControlledLoad<Int>()
        let other = sources.loadable(for: "a").joined { _ in inner.makeLoadable() }
        let load = Task { try await other.load() }
        try await inner.waitForStart()
        _ = sources.set(WritesWhenReleased {}, version: 2, for: "a")
        inner.fail(Boom(code: 1))
        await #expect(throws: Boom(code: 1)) { try await load.value }
      case "an instrument's attemptEnded":
        // An instrument is user code: it hears of the attempt's end where the attempt ends, on its
        // task.
        let other = AsyncLoadable { 7 }
        other.instrument = InstrumentWriter(onStart: false, write: write)
        try await other.load()
      case "an instrument's attemptStarted":
        // A `flatMap`'s step runs where its source's attempt ended, on its task, and starts the
        // attempt of the loadable its transform returned there.
        let inner = AsyncLoadable { 7 }
        inner.instrument = InstrumentWriter(onStart: true, write: write)
        let other = source.flatMap { _ in inner }
        try await other.load()
      default:
        // The refresh's answer replaces the first inner loadable where the refresh's inner
        // loadable's attempt ended, on its task.
        let other = source.flatMap { value -> AsyncLoadable<Int> in
          let token = writesWhenReleasedIfFirst()
          return AsyncLoadable {
            _ = token
            return value
          }
        }
        try await other.load()
        other.sync()
      }
    }
  }

  @Test func aLoadablesAttemptSeesNoTaskLocalOfItsCaller() async throws {
    let seen = Recorder<String>()
    let loadable = AsyncLoadable { () async -> Int in
      seen.append(CallerTrace.id ?? "none")
      return 1
    }
    try await CallerTrace.$id.withValue("load") { try await loadable.load() }
    CallerTrace.$id.withValue("sync") { loadable.sync() }
    await eventually { seen.count == 2 && loadable.loadStatus == .loaded }
    #expect(seen.values == ["none", "none"])
  }

  @Test func aJobsRunSeesNoTaskLocalOfWhoStartedIt() async throws {
    let job = Job(TraceWork())
    CallerTrace.$id.withValue("starter") { _ = job.start() }
    #expect(try await job.output == "none")
  }
}

/// Holds the first attempt started for a dependent on the thread that started it — inside the
/// dependent's call, after its wait joined the attempt — until ``release()``.
final class HoldingInstrument: LoadInstrument {
  private let held = Atomic<Bool>(false)
  private let gate = DispatchSemaphore(value: 0)

  /// Whether an attempt is held (or was).
  var isHolding: Bool { held.load(ordering: .acquiring) }

  func release() { gate.signal() }

  func attemptStarted(_ attempt: LoadAttempt) {
    guard attempt.parent != nil else { return }
    let (first, _) = held.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
    guard first else { return }
    _ = gate.wait(timeout: .now() + .seconds(30))
  }
}

/// An instrument that records what it is told, and whether inside an attempt.
struct TellsWhereItIsTold: LoadInstrument {
  let told: Recorder<String>
  func record(_ event: String) { told.append("\(event) \(AttemptContext.current == nil ? "outside" : "inside")") }
  func attemptStarted(_ attempt: LoadAttempt) { record("started") }
  func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) { record("retrying") }
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) { record("ended") }
  func claimBegan(_ claim: LoadClaimReport) { record("claimBegan") }
  func claimEnded(_ claim: LoadClaimReport, duration: Duration) { record("claimEnded") }
}

/// An instrument that writes when an attempt starts, or when it ends.
struct InstrumentWriter: LoadInstrument {
  let onStart: Bool
  let write: @Sendable () -> Void
  func attemptStarted(_ attempt: LoadAttempt) { if onStart { write() } }
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) { if !onStart { write() } }
}

/// A value that runs `onRelease` in its `deinit`.
final class WritesWhenReleased: Sendable {
  let onRelease: @Sendable () -> Void
  init(_ onRelease: @escaping @Sendable () -> Void) { self.onRelease = onRelease }
  deinit { onRelease() }
}
