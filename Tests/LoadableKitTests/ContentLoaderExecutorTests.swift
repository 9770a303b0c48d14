#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// `ContentLoader(taskExecutor:)`: the loader's tasks run on the executor given — its loads, what
/// they load, its timers — and nothing runs before that executor runs it.
@Suite("ContentLoader task executor", .timeLimit(.minutes(1)))
struct ContentLoaderExecutorTests {
  /// The threads the loads ran on, by name.
  final class Threads: Sendable {
    private let seen = Mutex<[String: pthread_t]>([:])
    func record(_ name: String) { seen.withLock(owner: self) { $0[name] = pthread_self() } }
    subscript(name: String) -> pthread_t? { seen.withLock(owner: self) { $0[name] } }
  }

  @Test func aClaimsLoadAndWhatItLoadsRunOnTheLoadersExecutor() async throws {
    let executor = ManualTaskExecutor()
    let threads = Threads()
    let item = AsyncLoadable<String>(name: "item") {
      threads.record("item")
      return "item"
    }
    let loader = ContentLoader<Int, String, Int>(idleTimeout: nil, taskExecutor: executor) { key in
      threads.record("row")
      return (try await item.fetchIfNeeded() + " \(key)", 1)
    }
    let claim = loader.begin(1)  // from the test's task, which is not on the executor
    #expect(executor.pendingJobCount > 0)
    #expect(threads["row"] == nil)  // nothing runs until the executor runs it
    let here = pthread_self()
    executor.runInOrder()
    for name in ["row", "item"] {
      let thread = try #require(threads[name], "\(name) did not run")
      #expect(pthread_equal(thread, here) != 0, "\(name) ran off the executor")
    }
    #expect(claim.snapshot.status == .loaded && claim.snapshot.value == "item 1")
    claim.end()
    executor.runInOrder()
    #expect(executor.pendingJobCount == 0)
  }

  @Test func aCallersLoadOfTheKeyCallsTheDataSourceOnTheLoadersExecutor() async throws {
    let executor = ManualTaskExecutor()
    let threads = Threads()
    let loader = ContentLoader<Int, String, Int>(idleTimeout: nil, taskExecutor: executor) { key in
      threads.record("row")
      return ("row \(key)", 1)
    }
    let loadable = loader.loadable(for: 2)
    let load = Task { try await loadable.fetch() }  // the caller's attempt starts off the executor
    await eventually { executor.pendingJobCount > 0 }
    #expect(threads["row"] == nil)
    let here = pthread_self()
    executor.runInOrder()
    let thread = try #require(threads["row"])
    #expect(pthread_equal(thread, here) != 0)
    #expect(try await load.value == "row 2")
  }

  /// As for any loadable, the key's observers hear of `.loading` before the task of a load its
  /// claim started is launched, so a fast load cannot resume a caller that joined it before the
  /// observers were told.
  @Test func theKeysObserversHearOfLoadingBeforeAClaimsLoadIsLaunched() async throws {
    let executor = ManualTaskExecutor()
    let loader = ContentLoader<Int, String, Int>(idleTimeout: nil, taskExecutor: executor) { key in ("row \(key)", 1) }
    let loadable = loader.loadable(for: 4)
    let launchedFirst = Recorder<Bool>()
    let observation = loadable.observeLoadStatus { status in
      if status == .loading { launchedFirst.append(executor.pendingJobCount > 0) }
    }
    let claim = loader.begin(4)
    #expect(launchedFirst.values == [false])
    executor.runInOrder()
    #expect(claim.snapshot.status == .loaded)
    claim.end()
    observation.cancel()
  }

  /// A load waits for the one slot; its only claim ends, and before the cancellation reaches its
  /// task, the slot frees and is handed to it (the seam runs the executor in that moment). It
  /// must give the slot back without calling the data source: its claims let go of it first.
  @Test func aLoadWhoseClaimsLetGoBeforeItsSlotCameNeverCallsTheDataSource() async throws {
    let executor = ManualTaskExecutor()
    let control = ControlledLoad<String>()
    let started = Recorder<Int>()
    let loader = ContentLoader<Int, String, Int>(
      idleTimeout: nil, maximumConcurrentLoads: 1, taskExecutor: executor
    ) { key in
      started.append(key)
      return (key == 0 ? try await control.operation() : "row \(key)", 1)
    }
    let first = loader.begin(0)
    let queued = loader.begin(1)
    executor.runInOrder()
    #expect(started.values == [0] && loader.limiter!.waitingCount == 1)
    ContentLoaderSeams.afterClaimEnded.withValue({
      control.resolve("row 0")  // the slot frees and goes to key 1's task, still not cancelled
      executor.runInOrder()
    }) {
      queued.end()
    }
    executor.runInOrder()
    #expect(started.values == [0])
    #expect(loader.limiter!.takenCount == 0 && loader.limiter!.waitingCount == 0)
    #expect(loader.snapshot(for: 1)?.status != .loading)
    first.end()
    executor.runInOrder()
  }

  @Test func theGraceTimerRunsOnTheLoadersExecutor() async throws {
    let executor = ManualTaskExecutor()
    let clock = TestClock()
    let control = ControlledLoad<String>()
    let loader = ContentLoader<Int, String, Int>(
      gracePeriod: .seconds(1), idleTimeout: nil, clock: clock, taskExecutor: executor
    ) { _ in (try await control.operation(), 1) }
    let claim = loader.begin(3)
    executor.runInOrder()
    #expect(control.startCount == 1)
    claim.end()  // the grace timer starts, on the executor
    executor.runInOrder()
    await clock.advance(by: .seconds(2))
    #expect(loader.snapshot(for: 3)?.status == .loading)  // its expiry waits for the executor
    executor.runInOrder()
    #expect(loader.snapshot(for: 3)?.status != .loading)
  }

  /// A loader released while several keys' grace timers run cancels every one of them in the one
  /// change its release makes: none sleeps on after it. (The timers' tasks and the keys' loads are
  /// held on the executor, so no load in flight keeps the loader.)
  @Test func aReleasedLoaderCancelsEveryGraceTimer() async throws {
    let executor = ManualTaskExecutor()
    let clock = TestClock()
    var loader: ContentLoader<Int, String, Int>? = ContentLoader(
      gracePeriod: .seconds(1), idleTimeout: nil, clock: clock, taskExecutor: executor
    ) { key in ("row \(key)", 1) }
    weak let released = loader
    do {
      let claims = (0..<3).map { loader!.begin($0) }  // three loads, on the executor, not run
      for claim in claims { claim.end() }  // three grace timers, on the executor, not run
    }
    #expect(executor.pendingJobCount == 6)
    loader = nil
    #expect(released == nil, "something kept the loader")
    executor.runInOrder()
    #expect(clock.sleeperCount == 0, "a grace timer sleeps on after its loader was released: \(clock.pendingDeadlines)")
  }

  /// One change of the loader ends several keys' attempts whose places were granted slots that
  /// their tasks had not come for yet: each slot goes to a task already waiting for one. Keys 0
  /// and 1 are granted the two slots, but their tasks are held; the tasks of keys 2 and 3 come
  /// for slots and wait. One `refresh(where:)` supersedes keys 0 and 1: both granted slots are
  /// given back in that one change, and keys 2 and 3 must both load (then 0 and 1 again).
  @Test func oneChangeThatGivesBackSeveralGrantedSlotsHandsEachToAWaitingTask() async throws {
    let executor = HoldingTaskExecutor()
    let started = Recorder<Int>()
    let loader = ContentLoader<Int, String, Int>(
      idleTimeout: nil, maximumConcurrentLoads: 2, taskExecutor: executor
    ) { key in
      started.append(key)
      return ("row \(key)", 1)
    }
    let limiter = try #require(loader.limiter)
    executor.isHolding = true
    let prefetch = loader.prefetch([0, 1])  // granted the two slots; their tasks held
    executor.isHolding = false
    let waiting = [loader.begin(2, priority: .background), loader.begin(3, priority: .background)]
    executor.runReady()  // keys 2 and 3's tasks come for a slot and wait for one
    #expect(started.values.isEmpty)
    #expect(limiter.counts == (waiting: 2, running: 2))
    #expect(limiter.state.withLock(owner: limiter) { $0.waiting.allSatisfy { $0.element.continuation != nil } })
    prefetch.cancel()  // one change: both granted places are given back
    executor.runReady()
    #expect(started.values.prefix(2).sorted() == [2, 3], "a waiting task was not handed its slot")
    executor.releaseHeld()
    executor.runReady()
    for claim in waiting { #expect(claim.snapshot.status == .loaded, "\(claim.snapshot)") }
    #expect(limiter.counts == (waiting: 0, running: 0))
    for claim in waiting { claim.end() }
    executor.runReady()
  }
}

/// A `TaskExecutor` that holds back the jobs enqueued while ``isHolding`` is set, and runs the
/// others, first in first out, when the test says so: a test starts some of a loader's tasks and
/// keeps the others from coming (the tasks of keys claimed while it held).
final class HoldingTaskExecutor: TaskExecutor, Sendable {
  private struct Queues {
    var isHolding = false
    var held: [UnownedJob] = []
    var ready: [UnownedJob] = []
  }
  private let queues = Mutex(Queues())

  var isHolding: Bool {
    get { queues.withLock(owner: self) { $0.isHolding } }
    set { queues.withLock(owner: self) { $0.isHolding = newValue } }
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queues.withLock(owner: self) { queues in
      if queues.isHolding { queues.held.append(job) } else { queues.ready.append(job) }
    }
  }

  /// Runs the jobs that are not held, and those they enqueue, until none is left.
  func runReady() {
    while let job = queues.withLock(owner: self, { $0.ready.isEmpty ? nil : $0.ready.removeFirst() }) {
      job.runSynchronously(on: asUnownedTaskExecutor())
    }
  }

  /// Makes the held jobs ready, after those ready now.
  func releaseHeld() {
    queues.withLock(owner: self) { queues in
      queues.ready += queues.held
      queues.held = []
    }
  }
}
