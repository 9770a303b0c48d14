@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

@Suite("AsyncLoadable", .timeLimit(.minutes(1)))
struct AsyncLoadableTests {
  @Test func tenThousandCallersShareOneAttempt() async throws {
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    let callers = 10_000
    try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<callers {
        group.addTask { try await loadable.fetchIfNeeded() }
      }
      await eventually { loadable.waiterCount == callers }
      // The attempt's task may not have called the operation yet when the last caller joined.
      try await control.waitForStart()
      #expect(control.startCount == 1)
      control.resolve(7)
      var results = 0
      for try await value in group {
        #expect(value == 7)
        results += 1
      }
      #expect(results == callers)
    }
    #expect(control.startCount == 1)
    #expect(control.maxConcurrentAttempts == 1)
  }

  /// Waiters resume in the order they joined, also after the first one left: the attempt keeps
  /// its first waiter apart from the others, and one that joins after the first left comes after
  /// those still waiting, not in the first one's place.
  @Test func waitersResumeInTheOrderTheyJoinedAfterTheFirstLeft() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let first = Task { try await loadable.fetch() }
    await eventually { loadable.waiterCount == 1 }
    let resumed = Recorder<Int>()
    loadable.load { _ in resumed.append(2) }
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    loadable.load { _ in resumed.append(3) }
    #expect(loadable.waiterCount == 2)
    // The attempt's task may not have reached the load yet: a resolve before that resolves
    // nothing (CI, a3f7763, under ThreadSanitizer: no completion ever came).
    try await control.waitForStart()
    #expect(control.resolve(1))
    await eventually { resumed.count == 2 }
    #expect(resumed.values == [2, 3])
  }

  @Test func cancellingACallerLeavesTheAttemptToTheOthers() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let first = Task { try await loadable.fetch() }
    let second = Task { try await loadable.fetch() }
    await eventually { loadable.waiterCount == 2 }
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(loadable.waiterCount == 1)
    #expect(loadable.loadStatus == .loading)
    #expect(control.cancelledCount == 0, "the attempt itself goes on")
    try await control.waitForStart()
    #expect(control.resolve(3))
    #expect(try await second.value == 3)
    #expect(loadable.loadStatus == .loaded)
  }

  @Test func aCallerCancelledBeforeItAsksDoesNotStartAnAttempt() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let caller = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await loadable.load()
    }
    await #expect(throws: CancellationError.self) { try await caller.value }
    #expect(loadable.loadStatus == .notLoaded)
    #expect(control.startCount == 0)
  }

  @Test func cancelLoadFailsEveryWaiter() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let outcomes = Recorder<Bool>()
    let completions = Recorder<Bool>()
    let waiters = (0..<100).map { _ in
      Task {
        do {
          try await loadable.load()
          outcomes.append(false)
        } catch is CancellationError {
          outcomes.append(true)
        }
      }
    }
    loadable.load { error in completions.append(error is CancellationError) }
    await eventually { loadable.waiterCount == 101 }
    // The attempt's work is running when the cancel comes (an attempt cancelled before its work
    // starts never runs it, and there is no cancellation for the work to see).
    try await control.waitForStart()
    loadable.cancelLoad()
    for waiter in waiters { _ = await waiter.result }
    #expect(outcomes.values == Array(repeating: true, count: 100))
    #expect(completions.values == [true])
    #expect(loadable.loadStatus == .failed)
    #expect(loadable.loadError is CancellationError)
    await eventually { control.cancelledCount == 1 }
    await #expect(throws: CancellationError.self) { try await loadable.load() }
  }

  @Test func aResultAfterCancelIsDroppedAndAttemptsNeverOverlap() async throws {
    let (loadable, control) = try await makeLoadable(in: .loading, ignoresCancellation: true)
    loadable.cancelLoad()
    #expect(loadable.loadStatus == .failed)
    let retry = Task { try await loadable.retryLoad() }
    await eventually { loadable.waiterCount == 1 }
    // The cancelled work is still running, so the new attempt waits for it.
    #expect(control.startCount == 1)
    control.resolve(99)
    try await control.waitForStart(2)
    #expect(loadable.content == nil, "the late result was dropped")
    #expect(loadable.loadStatus == .loading)
    control.resolve(5)
    try await retry.value
    #expect(loadable.content == 5)
    #expect(control.maxConcurrentAttempts == 1)
  }

  @Test func anAttemptCancelledWhileItsTaskWaitsForTheGateNeverRuns() async throws {
    let (loadable, control) = try await makeLoadable(in: .loading, ignoresCancellation: true)
    loadable.cancelLoad()
    let retry = Task { try await loadable.retryLoad() }
    // The cancelled work still runs: the retry's task waits for the gate.
    await eventually { loadable.gateQueueCountForTesting == 1 }
    loadable.cancelLoad()
    await #expect(throws: CancellationError.self) { try await retry.value }
    control.resolve(99)  // the first work returns and hands the gate on
    let third = Task { try await loadable.retryLoad() }
    try await control.waitForStart(2)
    control.resolve(7)
    await eventually { loadable.loadStatus == .loaded }
    #expect(control.startCount == 2, "the attempt cancelled at the gate never ran its work")
    // Had it run, the third attempt's work would be waiting now: let it return, not hang.
    while control.resolve(0) {}
    _ = try? await third.value
    #expect(loadable.content == 7)
    #expect(control.maxConcurrentAttempts == 1)
  }

  /// "Nothing grows without bound": an attempt cancelled while its task waits for the gate (a
  /// cancelled attempt's work that ignores cancellation holds it) leaves the queue at once, its
  /// task ended — it waited there, holding its attempt and the loadable, until the hung work
  /// returned (for ever if it never does), one more task each `retryLoad()` and `cancelLoad()`.
  /// The gate stays the hung work's: the next attempt still waits for it (a second review,
  /// helper 37).
  @Test func attemptsCancelledAtTheGateLeaveItsQueue() async throws {
    let (loadable, control) = try await makeLoadable(in: .loading, ignoresCancellation: true)
    loadable.cancelLoad()  // its work ignores cancellation and has not returned: it holds the gate
    for _ in 1...20 {
      let retry = Task { try await loadable.retryLoad() }
      await eventually { loadable.gateQueueCountForTesting == 1 }  // its task waits at the gate
      loadable.cancelLoad()
      await #expect(throws: CancellationError.self) { try await retry.outcome }
      await eventually { loadable.gateQueueCountForTesting == 0 }
      guard loadable.gateQueueCountForTesting == 0 else { break }  // failed: one round says it
    }
    #expect(loadable.gateQueueCountForTesting == 0, "tasks of cancelled attempts still held at the gate")
    #expect(control.startCount == 1)
    let next = Task { try await loadable.retryLoad() }
    await eventually { loadable.gateQueueCountForTesting == 1 }
    #expect(control.startCount == 1, "the hung work still holds the gate")
    control.resolve(99)
    try await control.waitForStart(2)
    control.resolve(7)
    try await next.outcome
    #expect(loadable.content == 7)
    #expect(control.maxConcurrentAttempts == 1)
  }

  @Test func aDroppedLoadableLivesUntilItsAttemptEndsAndNoLonger() async throws {
    let control = ControlledLoad<Int>()
    weak var weakLoadable: AsyncLoadable<Int>?
    let observed = Recorder<LoadStatus>()
    var observation: LoadObservation?
    do {
      let loadable = control.makeLoadable()
      weakLoadable = loadable
      observation = loadable.observeLoadStatus { observed.append($0) }
      loadable.sync()
    }
    try await control.waitForStart()
    #expect(weakLoadable != nil, "a running attempt keeps its loadable alive")
    control.resolve(1)
    await eventually { weakLoadable == nil }
    #expect(observed.values == [.notLoaded, .loading, .loaded])
    observation?.cancel()
  }

  @Test func refreshKeepsContentAndAFailedRefreshIsSticky() async throws {
    let (loadable, control) = try await makeLoadable(in: .loaded)
    let refresh = Task { try await loadable.fetch() }
    try await control.waitForStart(2)
    #expect(loadable.loadStatus == .loading)
    #expect(loadable.content == 1)
    // fetchIfNeeded answers with the old content during a refresh.
    #expect(try await loadable.fetchIfNeeded() == 1)
    control.fail(Boom(code: 2))
    await #expect(throws: Boom(code: 2)) { try await refresh.value }
    #expect(loadable.loadStatus == .failed)
    #expect(loadable.content == 1, "a failed refresh keeps the old content")
    #expect(loadable.loadError as? Boom == Boom(code: 2))
    await #expect(throws: Boom(code: 2)) { try await loadable.load() }
    #expect(control.startCount == 2)
    let retry = Task { try await loadable.retryLoad() }
    try await control.waitForStart(3)
    control.resolve(3)
    try await retry.value
    #expect(loadable.content == 3)
    #expect(loadable.loadError == nil)
  }

  @Test func constantsStayConstant() async throws {
    let loaded = AsyncLoadable(content: "map")
    #expect(loaded.loadStatus == .loaded)
    #expect(try await loaded.fetch() == "map")
    #expect(loaded.content == "map")

    let failed = AsyncLoadable<String>(error: Boom(code: 9))
    #expect(failed.loadStatus == .failed)
    await #expect(throws: Boom(code: 9)) { try await failed.load() }
    await #expect(throws: Boom(code: 9)) { try await failed.retryLoad() }
    #expect(failed.loadStatus == .failed)
    #expect(failed.loadError as? Boom == Boom(code: 9))
  }

  @Test func fetchThrowsNoContentWhenContentIsUnavailable() async throws {
    final class EmptyList: AsyncLoadable<[Int]>, @unchecked Sendable {
      override func performLoad() async throws -> [Int] { [] }
      override var isContentAvailable: Bool { !(content ?? []).isEmpty }
    }
    let list = EmptyList()
    await #expect(throws: LoadableError.noContent) { try await list.fetch() }
    #expect(list.loadStatus == .loaded, "the attempt itself succeeded")
    #expect(list.needsSync)
  }

  @Test func subclassHookRunsOncePerAttempt() async throws {
    final class Counter: AsyncLoadable<Int>, @unchecked Sendable {
      let calls = Atomic<Int>(0)
      override func performLoad() async throws -> Int {
        calls.wrappingAdd(1, ordering: .relaxed).newValue
      }
    }
    let counter = Counter()
    try await counter.load()
    try await counter.load()
    #expect(try await counter.fetchIfNeeded() == 1)
    #expect(try await counter.fetch() == 2)
    #expect(counter.calls.load(ordering: .relaxed) == 2)
  }

  @Test func completionHandlersRunOnceAfterTheCallReturned() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let registered = Atomic<Bool>(false)
    let calls = Recorder<Bool>()
    loadable.load { error in calls.append(error == nil && registered.load(ordering: .acquiring)) }
    registered.store(true, ordering: .releasing)
    try await control.waitForStart()
    #expect(calls.count == 0)
    control.resolve(1)
    await eventually { calls.count == 1 }
    #expect(calls.values == [true])
    // Known answers are delivered at once.
    loadable.retryLoad { error in calls.append(error == nil) }
    #expect(calls.values == [true, true])
  }

  /// An observer that cancels the attempt when it hears `.loading` does so inside the call that
  /// started it, which delivers that change: the call's completion handler still runs after the
  /// call returned (SPEC §1), once, with `CancellationError` — for a loadable, for a `map` and a
  /// `zip` whose source's observer cancels them, and for a retry.
  @Test(arguments: ["loadable", "retry", "map", "zip"])
  func aCancelFromAnObserverInsideTheCallRunsTheCompletionAfterIt(shape: String) async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    if shape == "retry" {
      source.sync()
      try await control.waitForStart()
      control.fail(Boom(code: 1))
      await eventually { source.loadStatus == .failed }
    }
    let loadable: AsyncLoadable<Int> =
      switch shape {
      case "map": source.map { $0 + 1 }
      case "zip": zip([source]).map { $0[0] }
      default: source
      }
    let observation = source.observeLoadStatus { status in
      if status == .loading { loadable.cancelLoad() }
    }
    let calls = Recorder<String>()
    @Sendable func completion(_ error: (any Error)?) {
      calls.append("\(CallerTrace.id ?? "after the call") \(error.map { "\(type(of: $0))" } ?? "nil")")
    }
    CallerTrace.$id.withValue("inside the call") {
      if shape == "retry" { loadable.retryLoad(completion: completion) } else { loadable.load(completion: completion) }
    }
    await eventually { calls.count == 1 }
    observation.cancel()
    #expect(calls.values == ["after the call CancellationError"])
    #expect(loadable.loadStatus == .failed)
  }

  /// Only the registering call's own handler is held back: one whose call returned earlier, failed
  /// by a `cancelLoad()` made inside another call, runs inside that `cancelLoad()`, before a
  /// handler of the same loadable registered after it. (From the review: every handler resumed on
  /// the thread was held back, and ran last.)
  @Test func aCancelInsideAnotherCallRunsAnEarlierCallsHandlerInIt() async throws {
    let controlA = ControlledLoad<Int>()
    let a = controlA.makeLoadable()
    let calls = Recorder<String>()
    a.load { error in calls.append("a first \(error.map { "\(type(of: $0))" } ?? "nil")") }
    try await controlA.waitForStart()
    let controlB = ControlledLoad<Int>()
    let b = controlB.makeLoadable()
    let observation = b.observeLoadStatus { status in
      guard status == .loading else { return }
      a.cancelLoad()
      calls.append("cancelLoad returned")
      a.load { error in calls.append("a second \(error.map { "\(type(of: $0))" } ?? "nil")") }  // known at once
    }
    b.load { _ in }
    observation.cancel()
    #expect(calls.values == ["a first CancellationError", "cancelLoad returned", "a second CancellationError"])
    try await controlB.waitForStart()
    controlB.resolve(1)
    try await b.load()
  }

  /// An answer known at once is still given inside the call (`load(completion:)`'s documentation),
  /// even while another call's completion handler is held back on the same thread.
  @Test func anAnswerKnownAtOnceRunsInsideTheCall() async throws {
    let loaded = AsyncLoadable(content: 1)
    let control = ControlledLoad<Int>()
    let loading = control.makeLoadable()
    let calls = Recorder<String>()
    let observation = loading.observeLoadStatus { status in
      if status == .loading { loaded.load { error in calls.append("\(CallerTrace.id ?? "after") \(error == nil)") } }
    }
    CallerTrace.$id.withValue("inside") { loading.load { _ in } }
    #expect(calls.values == ["inside true"])
    observation.cancel()
    try await control.waitForStart()
    control.resolve(1)
    try await loading.load()
  }

  @Test func syncIfNeededRefreshesStaleContent() async throws {
    final class Expiring: AsyncLoadable<Int>, @unchecked Sendable {
      let expired = Atomic<Bool>(false)
      let control: ControlledLoad<Int>
      init(control: ControlledLoad<Int>) {
        self.control = control
        super.init()
      }
      override func performLoad() async throws -> Int { try await control.operation() }
      override var needsSync: Bool { super.needsSync || expired.load(ordering: .relaxed) }
    }
    let control = ControlledLoad<Int>()
    let token = Expiring(control: control)
    token.syncIfNeeded()
    try await control.waitForStart()
    control.resolve(1)
    await eventually { token.loadStatus == .loaded }
    token.syncIfNeeded()
    #expect(token.loadStatus == .loaded)
    token.expired.store(true, ordering: .relaxed)
    token.syncIfNeeded()
    #expect(token.loadStatus == .loading)
    #expect(token.content == 1)
    try await control.waitForStart(2)
    control.resolve(2)
    await eventually { token.loadStatus == .loaded }
    #expect(token.content == 2)
  }

  @Test func snapshotIsConsistent() async throws {
    let (loadable, _) = try await makeLoadable(in: .failed)
    let snapshot = loadable.snapshot
    #expect(snapshot.status == .failed)
    #expect(snapshot.content == nil)
    #expect(snapshot.error as? Boom == Boom(code: 1))
  }

  @Test func loadableErrorsCompareByCode() {
    let custom = LoadableError(code: .timedOut, message: "portal took 30 s")
    #expect(custom == .timedOut)
    #expect(custom != .noContent)
    #expect(Set([custom, LoadableError.timedOut]).count == 1)
    #expect("\(custom)".contains("portal took 30 s"))
    #expect(LoadStatus.loading.description == "loading")
  }

  /// An attempt calls the closure a loadable was made with directly only for an `AsyncLoadable`
  /// itself: a subclass made with the same initializers (visible to it here, through
  /// `@testable`) runs its override of `performLoad()`, whose `super` call runs the closure, or
  /// gives back the content a constant was made with.
  @Test func aSubclassMadeWithAnOperationRunsItsOverride() async throws {
    final class Doubling: AsyncLoadable<Int>, @unchecked Sendable {
      override func performLoad() async throws -> Int { try await super.performLoad() * 2 }
    }
    #expect(try await Doubling { 21 }.fetch() == 42)
    #expect(try await Doubling { () async throws -> Int in 4 }.fetch() == 8)
    let constant = Doubling(content: 5)
    #expect(constant.content == 5)
    #expect(try await constant.fetch() == 10, "a refresh runs the override")
    let failing = Doubling(error: Boom(code: 3))
    await #expect(throws: Boom(code: 3)) { try await failing.fetch() }
    #expect(try await AsyncLoadable(content: 5).fetch() == 5)
  }

  @Test func aLoadableWithoutAnOperationTraps() async {
    await #expect(processExitsWith: .failure) {
      let loadable = AsyncLoadable<Int>()
      try? await loadable.load()
    }
  }
}

@Suite("Observation", .timeLimit(.minutes(1)))
struct ObservationTests {
  @Test func streamSeesCurrentStatusThenEveryChange() async throws {
    let (loadable, control) = try await makeLoadable(in: .loaded)
    var iterator = loadable.loadStatusUpdates.makeAsyncIterator()
    #expect(await iterator.next() == .loaded)
    loadable.sync()
    try await control.waitForStart(2)
    control.fail(Boom())
    await eventually { loadable.loadStatus == .failed }
    let retry = Task { try await loadable.retryLoad() }
    try await control.waitForStart(3)
    control.resolve(4)
    try await retry.value
    var seen: [LoadStatus] = []
    for _ in 0..<4 { seen.append(await iterator.next()!) }
    #expect(seen == [.loading, .failed, .loading, .loaded])
  }

  @Test func handlersSeeEveryChangeInOrderAndMayReenter() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let seen = Recorder<LoadStatus>()
    let read = Recorder<LoadStatus>()
    let observation = loadable.observeLoadStatus { status in
      // Re-entering the loadable from a handler must not deadlock: it reads the status (which
      // may have moved on since `status` was delivered, but not while nothing else happens).
      read.append(loadable.loadStatus)
      seen.append(status)
      if status == .failed { loadable.sync() }
    }
    #expect(seen.values == [.notLoaded] && read.values == [.notLoaded])
    loadable.sync()
    try await control.waitForStart()
    control.fail(Boom())
    try await control.waitForStart(2)  // the handler restarted it
    control.resolve(1)
    await eventually { seen.count == 5 }
    #expect(seen.values == [.notLoaded, .loading, .failed, .loading, .loaded])
    #expect(read.values.count == 5 && read.values.last == .loaded)
    observation.cancel()
    loadable.sync()
    try await control.waitForStart(3)
    control.resolve(2)
    await eventually { loadable.loadStatus == .loaded }
    #expect(seen.count == 5, "a cancelled observation hears nothing more")
  }

  @Test func aDeallocatedLoadableEndsItsStreams() async {
    var loadable: AsyncLoadable<Int>? = AsyncLoadable { 1 }
    let stream = loadable!.loadStatusUpdates
    loadable = nil
    var statuses: [LoadStatus] = []
    for await status in stream { statuses.append(status) }
    #expect(statuses == [.notLoaded])
  }

  @Test func observationTrackingFiresOnStatusChange() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let fired = Recorder<Bool>()
    withObservationTracking {
      _ = loadable.loadStatus
    } onChange: {
      fired.append(true)
    }
    #expect(fired.count == 0)
    loadable.sync()
    #expect(fired.count == 1)
    let contentFired = Recorder<Bool>()
    withObservationTracking {
      _ = loadable.content
    } onChange: {
      contentFired.append(true)
    }
    try await control.waitForStart()
    control.resolve(1)
    await eventually { contentFired.count == 1 }
  }
}

@Suite("Priority", .timeLimit(.minutes(1)))
struct PriorityTests {
  /// An attempt that waits for `gate`, then reports the priority its task runs at.
  final class Recording: AsyncLoadable<TaskPriority>, @unchecked Sendable {
    let gate = ControlledLoad<Void>()
    override func performLoad() async throws -> TaskPriority {
      try await gate.operation()
      await waitUntilRaised(to: .high)  // the joining caller raises it just after it joined
      return Task.currentPriority
    }
  }

  @Test func aHigherPriorityCallerRaisesTheSharedAttempt() async throws {
    let loadable = Recording()
    let low = Task(priority: .background) { try await loadable.fetch() }
    try await loadable.gate.waitForStart()
    let high = Task(priority: .high) { try await loadable.fetch() }
    await eventually { loadable.waiterCount == 2 }
    loadable.gate.resolve(())
    let observed = try await high.value
    #expect(observed >= .high)
    #expect(try await low.value == observed)
  }

  /// A caller with a completion handler joins as an awaiting caller does: from a more urgent
  /// task, it raises the shared attempt (it did not; a second review, helper 37).
  @Test func aHigherPriorityCompletionHandlerCallerRaisesTheSharedAttempt() async throws {
    let loadable = Recording()
    let low = Task(priority: .background) { try await loadable.fetch() }
    try await loadable.gate.waitForStart()
    let done = Recorder<Bool>()
    await Task(priority: .high) { loadable.load { _ in done.append(true) } }.value
    #expect(loadable.waiterCount == 2)
    loadable.gate.resolve(())
    #expect(try await low.outcome >= .high)
    await eventually { done.count == 1 }
  }
}
