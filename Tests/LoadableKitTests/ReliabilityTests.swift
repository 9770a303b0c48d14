import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("Leaks", .timeLimit(.minutes(1)))
struct LeakTests {
  @Test func aDroppedPipelineIsFreedWithItsParents() async throws {
    weak var weakParent: AsyncLoadable<Int>?
    weak var weakMapped: AsyncLoadable<Int>?
    weak var weakZipped: AsyncLoadable<(Int, Int)>?
    weak var weakFlat: AsyncLoadable<Int>?
    weak var weakInner: AsyncLoadable<Int>?
    do {
      let parent = AsyncLoadable { 2 }
      // Closures that capture the parent do not keep the pipeline alive once it is dropped.
      let mapped = parent.map { $0 + (parent.content ?? 0) }
      let inner = AsyncLoadable { 3 }
      let flat = mapped.flatMap { _ in inner }
      let zipped = zip(mapped, flat.asyncMap { $0 })
      let observation = zipped.observeLoadStatus { _ in _ = zipped.loadStatus }
      _ = try await zipped.fetch()
      observation.cancel()
      weakParent = parent
      weakMapped = mapped
      weakZipped = zipped
      weakFlat = flat
      weakInner = inner
    }
    await eventually { weakZipped == nil && weakFlat == nil && weakMapped == nil && weakParent == nil && weakInner == nil }
  }

  @Test func anObserverThatCapturesItsLoadableIsFreedWithItsToken() async throws {
    weak var weakLoadable: AsyncLoadable<Int>?
    do {
      let loadable = AsyncLoadable { 1 }
      var observation: LoadObservation? = loadable.observeLoadStatus { _ in _ = loadable.content }
      try await loadable.load()
      weakLoadable = loadable
      _ = observation
      observation = nil  // dropping the token ends the observation and breaks the cycle
    }
    await eventually { weakLoadable == nil }
  }

  @Test func aCancelledCascadeLeavesNothingBehind() async throws {
    weak var weakParent: AsyncLoadable<Int>?
    weak var weakChild: AsyncLoadable<Int>?
    let control = ControlledLoad<Int>()
    do {
      let parent = control.makeLoadable()
      let child = parent.map { $0 }
      let load = Task { try await child.load() }
      try await control.waitForStart()
      child.cancelLoad()
      _ = await load.result
      weakParent = parent
      weakChild = child
    }
    await eventually { weakParent == nil && weakChild == nil }
  }
}

@Suite("Misuse", .timeLimit(.minutes(1)))
struct MisuseTests {
  @Test func observingAReleasedLoadableIsHarmless() async {
    var loadable: AsyncLoadable<Int>? = AsyncLoadable { 1 }
    let observation = loadable!.observeLoadStatus { _ in }
    let stream = loadable!.loadStatusUpdates
    loadable = nil
    observation.cancel()
    observation.cancel()
    var count = 0
    for await _ in stream { count += 1 }
    #expect(count == 1)
  }

  @Test func cancelStillWorksWhenPerformLoadNeverReturns() async throws {
    let control = ControlledLoad<Int>(ignoresCancellation: true)
    let loadable = control.makeLoadable()
    let first = Task { try await loadable.load() }
    try await control.waitForStart()
    loadable.cancelLoad()
    await #expect(throws: CancellationError.self) { try await first.value }
    // A retry waits for the stuck work (performLoad never runs twice at once) — and can be
    // cancelled too.
    let retry = Task { try await loadable.retryLoad() }
    await eventually { loadable.waiterCount == 1 }
    #expect(loadable.loadStatus == .loading)
    loadable.cancelLoad()
    await #expect(throws: CancellationError.self) { try await retry.value }
    #expect(control.startCount == 1)
    control.resolve(0)  // let the stuck work end so the test leaves nothing running
    await eventually { control.pendingCount == 0 }
  }

  @Test func aSubclassThatThrowsAtOnceFails() async {
    final class Broken: AsyncLoadable<Int>, @unchecked Sendable {
      override func performLoad() async throws -> Int { throw Boom(code: 13) }
    }
    let broken = Broken()
    await #expect(throws: Boom(code: 13)) { try await broken.fetch() }
    #expect(broken.loadStatus == .failed)
    await #expect(throws: Boom(code: 13)) { try await broken.load() }
  }

  @Test func completionHandlersMayReenter() async throws {
    let (loadable, control) = try await makeLoadable(in: .notLoaded)
    let done = Recorder<String>()
    loadable.load { _ in
      loadable.load { _ in done.append("inner") }
      loadable.cancelLoad()
      done.append("outer")
    }
    try await control.waitForStart()
    control.resolve(1)
    await eventually { done.count == 2 }
    #expect(done.values == ["inner", "outer"])
  }
}

@Suite("Soak", .timeLimit(.minutes(10)))
struct SoakTests {
  /// Runs only when `LOADABLEKIT_SOAK_SECONDS` is set (`.ci/run` sets a short one).
  @Test(.enabled(if: ProcessInfo.processInfo.environment["LOADABLEKIT_SOAK_SECONDS"] != nil))
  func mixedOperationsOnThousandsOfLoadables() async throws {
    let seconds = Double(ProcessInfo.processInfo.environment["LOADABLEKIT_SOAK_SECONDS"] ?? "") ?? 5
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    let loadables = (0..<2_000).map { _ in Flaky() }
    let derived = loadables.map { $0.map { $0 * 2 } }
    var rounds = 0
    var baseline = 0
    var peak = 0
    while ContinuousClock.now < deadline {
      let round = rounds
      await withTaskGroup(of: Void.self) { group in
        for worker in 0..<8 {
          group.addTask {
            var generator = SplitMix64(seed: UInt64(round * 8 + worker))
            for _ in 0..<2_000 {
              let index = Int.random(in: 0..<loadables.count, using: &generator)
              let loadable = loadables[index]
              switch Int.random(in: 0..<8, using: &generator) {
              case 0: _ = try? await loadable.load()
              case 1: _ = try? await loadable.retryLoad()
              case 2: loadable.cancelLoad()
              case 3: loadable.sync()
              case 4: _ = try? await loadable.fetchIfNeeded()
              case 5: _ = try? await derived[index].retryLoad()
              case 6: derived[index].cancelLoad()
              default:
                let observation = loadable.observeLoadStatus { _ in }
                observation.cancel()
              }
            }
          }
        }
      }
      rounds += 1
      let resident = residentBytes()
      if rounds == 2 { baseline = resident }
      peak = max(peak, resident)
    }
    for loadable in loadables {
      await eventually { loadable.loadStatus != .loading }
      #expect(loadable.maxRunning.load(ordering: .relaxed) == 1)
      #expect(loadable.waiterCount == 0)
    }
    for loadable in derived { await eventually { loadable.loadStatus != .loading } }
    if baseline > 0 {
      #expect(peak - baseline < 64 << 20, "memory grew by \((peak - baseline) >> 20) MiB over \(rounds) rounds")
    }
  }
}

/// The resident set size of this process, from /proc (0 where unavailable).
func residentBytes() -> Int {
  guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
  let fields = statm.split(separator: " ")
  guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
  return pages * 4096
}

@Suite("Job leaks", .timeLimit(.minutes(1)))
struct JobLeakTests {
  @Test func finishedAndCancelledJobsAreFreed() async throws {
    weak var finished: Job<CountingWork>?
    weak var cancelled: Job<CountingWork>?
    do {
      let job = Job(CountingWork(units: 3))
      let events = job.events
      job.start()
      _ = try await job.output
      for await _ in events { break }
      finished = job
      let other = Job(CountingWork(units: 3))
      let gate = JobLatch()
      JobHooks.set(other.work.id) { _ in await gate.wait() }
      other.start()
      let cancelling = Task { await other.cancel() }
      gate.open()
      _ = await cancelling.value
      cancelled = other
    }
    await eventually { finished == nil && cancelled == nil }
  }
}

@Suite("Found in review", .timeLimit(.minutes(1)))
struct ReviewRegressionTests {
  @Test func aClaimHandlerThatHoldsAnotherClaimCanBeReleased() async {
    let loader = ContentLoader<Int, String, Int> { key in ("v\(key)", 1) }
    var other: ContentLoader<Int, String, Int>.Claim? = loader.begin(2)
    let delivered = Counter()
    let claim = loader.begin(1) { [other] _ in
      _ = other
      delivered.increment()
    }
    other = nil
    await eventually { delivered.count > 0 }
    claim.end()  // frees the handler, and with it the other claim, whose deinit ends it
    await eventually { loader.snapshot(for: 2)?.status != .loading }
  }

  @Test func aKeyedLoadableWhoseEntryWasEvictedLoadsAgain() async throws {
    let loads = Counter()
    let loader = ContentLoader<Int, String, Int>(maximumIdleCount: 0) { key in
      loads.increment()
      return ("v\(key)", loads.count)
    }
    let claim = loader.begin(1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    let loadable = loader.loadable(for: 1)
    claim.end()  // idle beyond the count of 0: evicted, maybe before the loadable mirrored it
    #expect(try await loadable.fetchIfNeeded() == "v1")
    #expect(loadable.loadStatus == .loaded)
  }

  @Test func aRestoredNegativeZeroProgressStillReachesOne() async throws {
    let job = Job(CountingWork(units: 3))
    var object = try JSONSerialization.jsonObject(with: try job.toJSON()) as! [String: Any]
    object["fractionCompleted"] = -0.0
    let restored = try Job<CountingWork>.fromJSON(try JSONSerialization.data(withJSONObject: object))
    #expect(restored.fractionCompleted.sign == .plus)
    restored.start()
    _ = try await restored.output
    #expect(restored.fractionCompleted == 1)
  }
}

/// Content whose `deinit` reads the loadable that held it: user code that must not run under the
/// loadable's lock.
final class ReentrantContent: Sendable {
  final class Owner: @unchecked Sendable {
    weak var loadable: AsyncLoadable<ReentrantContent>?
  }
  let owner: Owner
  let reads: Counter
  init(owner: Owner, reads: Counter) {
    self.owner = owner
    self.reads = reads
  }
  deinit {
    _ = owner.loadable?.loadStatus
    reads.increment()
  }
}

@Suite("Released outside the lock", .timeLimit(.minutes(1)))
struct ReleasedOutsideTheLockTests {
  @Test func replacedContentIsDestroyedOutsideTheLock() async throws {
    let owner = ReentrantContent.Owner()
    let reads = Counter()
    let loadable = AsyncLoadable { ReentrantContent(owner: owner, reads: reads) }
    owner.loadable = loadable
    try await loadable.load()
    _ = try await loadable.fetch()  // the refresh replaces (and frees) the first content
    _ = try await loadable.fetch()
    await eventually { reads.count >= 2 }
    let mappedOwner = ReentrantContent.Owner()
    let mapped = loadable.map { _ in ReentrantContent(owner: mappedOwner, reads: reads) }
    mappedOwner.loadable = mapped
    #expect(mapped.loadStatus == .loaded)
    _ = try await loadable.fetch()  // the live view replaces its content too
    await eventually { reads.count >= 4 }
  }
}

@Suite("Found in the core review", .timeLimit(.minutes(1)))
struct CoreReviewRegressionTests {
  @Test func aTaskStartedByAnObserverIsNotPartOfTheAttemptThatTriggeredIt() async throws {
    for _ in 0..<50 {
      let c = AsyncLoadable { 1 }
      let d = AsyncLoadable { 2 }
      d.addDependency(c)
      let x = AsyncLoadable { 3 }
      x.addDependency(d)
      let outcome = Recorder<String>()
      let observation = c.observeLoadStatus { status in
        guard status == .loaded else { return }
        Task {
          do {
            try await x.load()
            outcome.append("ok")
          } catch {
            outcome.append("\(error)")
          }
        }
      }
      try await d.load()
      await eventually { outcome.count == 1 }
      #expect(outcome.values == ["ok"])
      observation.cancel()
    }
  }

  @Test func aMapOfARefreshThatFailedKeepsItsContentAndMirrorsTheFailure() async throws {
    let (parent, control) = try await makeLoadable(in: .loaded)
    let refresh = Task { try await parent.fetch() }
    try await control.waitForStart(2)
    control.fail(Boom(code: 5))
    _ = await refresh.result
    let doubled = parent.map { $0 * 2 }
    #expect(doubled.loadStatus == .failed)
    #expect(doubled.content == 2)
    #expect(doubled.loadError as? Boom == Boom(code: 5))
  }

  @Test func concurrentRefreshesNeverLeaveTheLiveViewBehind() async throws {
    for _ in 0..<20 {
      let counter = Counter()
      let parent = AsyncLoadable { counter.increment() }
      try await parent.load()
      let doubled = parent.map { $0 * 2 }
      await withTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
          group.addTask { for _ in 0..<10 { _ = try? await parent.fetch() } }
        }
      }
      await eventually { doubled.content == (parent.content ?? 0) * 2 }
      #expect(!doubled.needsSync)
    }
  }

  @Test func aFlatMapReleasesItsPreviousInnerLoadableOutsideItsLock() async throws {
    final class Holder: @unchecked Sendable { weak var outer: AsyncLoadable<Int>? }
    let holder = Holder()
    final class ReadingInner: AsyncLoadable<Int>, @unchecked Sendable {
      let holder: Holder
      init(holder: Holder) {
        self.holder = holder
        super.init()
      }
      override func performLoad() async throws -> Int { 1 }
      deinit { _ = holder.outer?.dependencies }
    }
    let parent = AsyncLoadable { 0 }
    let outer = parent.flatMap { _ in ReadingInner(holder: holder) }
    holder.outer = outer
    _ = try await outer.fetch()
    _ = try await outer.fetch()  // replaces the first inner loadable, whose deinit reads `outer`
    _ = try await outer.fetch()
  }
}
