@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Records what an instrument is told, in order.
final class RecordingInstrument: LoadInstrument {
  enum Report: Sendable {
    case started(LoadAttempt)
    case retrying(LoadAttempt, LoadAttempt.Retry)
    case ended(LoadAttempt, LoadAttempt.End)
  }

  private let claims = Mutex<[(began: Bool, claim: LoadClaimReport)]>([])
  private let jobs = Mutex<[JobReport]>([])
  func claimBegan(_ claim: LoadClaimReport) { claims.withLock(owner: self) { $0.append((true, claim)) } }
  func claimEnded(_ claim: LoadClaimReport, duration: Duration) { claims.withLock(owner: self) { $0.append((false, claim)) } }
  func jobReported(_ report: JobReport) { jobs.withLock(owner: self) { $0.append(report) } }
  var claimReports: [(began: Bool, claim: LoadClaimReport)] { claims.withLock(owner: self) { $0 } }
  var jobReports: [JobReport] { jobs.withLock(owner: self) { $0 } }

  private let reports = Mutex<[Report]>([])
  /// Called with every report, outside the recorder's lock (a test calls back into loadables).
  let onReport: @Sendable (Report) -> Void

  /// Only attempts whose name starts with it are recorded: a process-wide recorder must not keep
  /// (and so keep alive) the errors of other tests running at the same time.
  let namePrefix: String?

  init(namePrefix: String? = nil, onReport: @escaping @Sendable (Report) -> Void = { _ in }) {
    self.namePrefix = namePrefix
    self.onReport = onReport
  }

  func attemptStarted(_ attempt: LoadAttempt) { record(.started(attempt), of: attempt) }
  func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) { record(.retrying(attempt, retry), of: attempt) }
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) { record(.ended(attempt, end), of: attempt) }

  private func record(_ report: Report, of attempt: LoadAttempt) {
    if let namePrefix, !attempt.name.hasPrefix(namePrefix) { return }
    onReport(report)
    reports.withLock(owner: self) { $0.append(report) }
  }

  var all: [Report] { reports.withLock(owner: self) { $0 } }
  var starts: [LoadAttempt] { all.compactMap { if case .started(let a) = $0 { a } else { nil } } }
  var ends: [(attempt: LoadAttempt, end: LoadAttempt.End)] {
    all.compactMap { if case .ended(let a, let e) = $0 { (a, e) } else { nil } }
  }
  var retries: [LoadAttempt.Retry] { all.compactMap { if case .retrying(_, let r) = $0 { r } else { nil } } }

  func starts(named name: String) -> [LoadAttempt] { starts.filter { $0.name == name } }
  func ends(named name: String) -> [LoadAttempt.End] { ends.filter { $0.attempt.name == name }.map(\.end) }

  /// Every attempt was started once and ended once, its start before its end.
  func expectBalanced(sourceLocation: SourceLocation = #_sourceLocation) {
    var open: Set<LoadAttempt.ID> = []
    var ended: Set<LoadAttempt.ID> = []
    for report in all {
      switch report {
      case .started(let attempt):
        #expect(open.insert(attempt.id).inserted, "\(attempt) started twice", sourceLocation: sourceLocation)
      case .retrying(let attempt, _):
        #expect(open.contains(attempt.id), "\(attempt) retried outside its life", sourceLocation: sourceLocation)
      case .ended(let attempt, _):
        #expect(open.remove(attempt.id) != nil, "\(attempt) ended without a start", sourceLocation: sourceLocation)
        #expect(ended.insert(attempt.id).inserted, "\(attempt) ended twice", sourceLocation: sourceLocation)
      }
    }
    #expect(open.isEmpty, "attempts never ended: \(open)", sourceLocation: sourceLocation)
  }
}


@Suite(.timeLimit(.minutes(1))) struct InstrumentTests {
  /// map ← (parks layer, trails layer) ← one shared table: each loadable runs one attempt, and
  /// each attempt's parent is the attempt that asked for it.
  @Test func oneStartAndOneEndPerAttemptWithTheRightParentsInAGraphWithASharedDependency() async throws {
    let recorder = RecordingInstrument()
    let control = ControlledLoad<String>()
    let table = control.makeLoadable().named("table")
    let parks = table.map { "parks on \($0)" }.named("parks")
    let trails = AsyncLoadable(name: "trails") { "trails" }
    trails.addDependency(table)
    let map = AsyncLoadable(name: "map") { "map" }
    map.addDependency(parks)
    map.addDependency(trails)
    for loadable in [table, parks, trails, map] { loadable.instrument = recorder }

    let load = Task { try await map.load() }
    try await control.waitForStart()
    // The table is held until both layers wait for its one attempt.
    await eventually { table.withState { $0.attempt?.waitingCount } == 2 }
    #expect(control.resolve("table"))
    try await load.value

    recorder.expectBalanced()
    #expect(recorder.starts.count == 4)
    for name in ["table", "parks", "trails", "map"] {
      #expect(recorder.starts(named: name).count == 1, "\(name)")
      #expect(recorder.ends(named: name).count == 1, "\(name)")
      #expect(recorder.ends(named: name).first.map { "\($0.outcome)" } == "loaded", "\(name)")
    }
    let mapAttempt = try #require(recorder.starts(named: "map").first)
    #expect(mapAttempt.parent == nil)
    #expect(mapAttempt.intent == .load)
    #expect(recorder.starts(named: "parks").first?.parent == mapAttempt.id)
    #expect(recorder.starts(named: "trails").first?.parent == mapAttempt.id)
    // The table was started by whichever layer asked first; the other joined that attempt.
    let layerIDs = Set(["parks", "trails"].compactMap { recorder.starts(named: $0).first?.id })
    let tableParent = try #require(recorder.starts(named: "table").first?.parent)
    #expect(layerIDs.contains(tableParent))
    #expect(recorder.ends(named: "table").first?.callers == 2)
  }

  /// A status handler that runs during an attempt, on its task, is user code the library calls
  /// back, not part of the attempt: what it starts has no parent (`AttemptContext.outside`), while
  /// what the attempt's own code starts is its child. Nested in another call back (the handler
  /// runs inside the `outside` block of `other.sync()`, which runs inside the attempt), it stays
  /// outside.
  @Test func whatAStatusHandlerStartsDuringAnAttemptIsNotItsChild() async throws {
    let recorder = RecordingInstrument()
    let fromHandler = AsyncLoadable(name: "from the handler") { "handler's" }
    let other = AsyncLoadable(name: "other") { "other" }
    let observation = other.observeLoadStatus { status in
      if status == .loading { fromHandler.sync() }
    }
    let owner = AsyncLoadable(name: "owner") { () -> String in
      other.sync()
      return "owner"
    }
    for loadable in [owner, other, fromHandler] { loadable.instrument = recorder }
    try await owner.load()
    await eventually { recorder.ends(named: "from the handler").count == 1 && recorder.ends(named: "other").count == 1 }
    withExtendedLifetime(observation) {}

    let ownerAttempt = try #require(recorder.starts(named: "owner").first)
    #expect(recorder.starts(named: "other").first?.parent == ownerAttempt.id)
    let handlers = recorder.starts(named: "from the handler")
    #expect(handlers.count == 1)
    #expect(handlers.first?.parent == nil)
  }

  @Test func aCascadeCancelEndsEveryAttemptItCancelledAsCancelled() async throws {
    let recorder = RecordingInstrument()
    let control = ControlledLoad<String>()
    let portal = control.makeLoadable().named("portal")
    let item = portal.map { "item of \($0)" }
    for loadable in [portal, item] { loadable.instrument = recorder }

    let load = Task { try await item.load() }
    try await control.waitForStart()
    item.cancelLoad()
    await #expect(throws: CancellationError.self) { try await load.value }
    await eventually { recorder.ends.count == 2 }

    recorder.expectBalanced()
    let itemAttempt = try #require(recorder.starts(named: "map(portal)").first)
    #expect(recorder.starts(named: "portal").first?.parent == itemAttempt.id)
    #expect(recorder.ends(named: "map(portal)").map { "\($0.outcome)" } == ["cancelled"])
    #expect(recorder.ends(named: "portal").map { "\($0.outcome)" } == ["cancelled"])
    #expect(portal.loadStatus == .notLoaded)  // the cascade put it back as it was
  }

  @Test func retriesAreReportedWithinTheAttemptAndCountedAtItsEnd() async throws {
    let recorder = RecordingInstrument()
    let clock = TestClock()
    let failures = Mutex(2)
    let failuresOwner = LockOwner()
    let portal = AsyncLoadable(name: "portal") { () throws -> String in
      try failures.withLock(owner: failuresOwner) { left in
        if left > 0 {
          left -= 1
          throw Boom(code: 503)
        }
      }
      return "portal"
    }
    portal.loadOptions = LoadOptions(
      retryPolicy: RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), jitter: 0), clock: clock)
    portal.instrument = recorder

    let load = Task { try await portal.load() }
    try await clock.waitForSleepers()
    await clock.advance(by: .seconds(1))
    try await clock.waitForSleepers()
    await clock.advance(by: .seconds(2))
    try await load.value

    recorder.expectBalanced()
    #expect(recorder.retries.map(\.number) == [1, 2])
    #expect(recorder.retries.map(\.delay) == [.seconds(1), .seconds(2)])
    #expect(recorder.retries.allSatisfy { ($0.error as? Boom) == Boom(code: 503) })
    let end = try #require(recorder.ends(named: "portal").first)
    #expect(end.retries == 2)
    #expect("\(end.outcome)" == "loaded")
  }

  @Test func aFailureAndARetryLoadAreReportedWithTheirIntentAndError() async throws {
    let recorder = RecordingInstrument()
    let control = ControlledLoad<String>()
    let table = control.makeLoadable().named("table")
    let layer = table.map { $0 }.named("layer")
    for loadable in [table, layer] { loadable.instrument = recorder }

    let first = Task { try await layer.load() }
    try await control.waitForStart()
    control.fail(Boom(code: 404))
    await #expect(throws: Boom.self) { try await first.value }
    let retry = Task { try await layer.retryLoad() }
    try await control.waitForStart(2)
    control.resolve("table")
    try await retry.value

    recorder.expectBalanced()
    #expect(recorder.starts(named: "layer").map(\.intent) == [.load, .retry])
    #expect(recorder.starts(named: "table").map(\.intent) == [.load, .retry])
    let outcomes = recorder.ends(named: "table").map(\.outcome)
    guard case .failed(let error) = outcomes.first else {
      Issue.record("the first attempt should have failed: \(outcomes)")
      return
    }
    #expect((error as? Boom) == Boom(code: 404))
    #expect("\(outcomes[1])" == "loaded")
  }

  /// An instrument that calls back into the loadable it hears about: reported under the
  /// loadable's lock, this would trap with a recursive lock.
  @Test func nothingIsReportedUnderALock() async throws {
    let watched = Mutex<[String: AsyncLoadable<String>]>([:])
    let watchedOwner = LockOwner()
    let seen = Recorder<String>()
    let recorder = RecordingInstrument { report in
      let name: String
      switch report {
      case .started(let attempt), .retrying(let attempt, _), .ended(let attempt, _): name = attempt.name
      }
      guard let loadable = watched.withLock(owner: watchedOwner, { $0[name] }) else { return }
      let snapshot = loadable.snapshot
      seen.append("\(loadable.displayName) \(snapshot.status) \(loadable.dependencyTree(showingDurations: false).count > 0)")
      _ = loadable.instrument
      loadable.syncIfNeeded()
    }
    let table = AsyncLoadable(name: "table") { "table" }
    let layer = table.map { $0 + "!" }.named("layer")
    watched.withLock(owner: watchedOwner) { $0 = ["table": table, "layer": layer] }
    for loadable in [table, layer] { loadable.instrument = recorder }

    _ = try await layer.fetch()
    await eventually { recorder.ends.count >= 2 }
    #expect(seen.count >= 4)
    #expect(seen.values.contains("layer loading true"))
  }

}

/// A job that reports progress at 5 %, 15 % and 55 %, posts a message and returns.
struct InstrumentedWork: JobWork {
  static let kind = "test.instrumented"
  func run(in context: JobContext<Int>) async throws -> Int {
    context.reportProgress(completed: 1, total: 20)
    context.reportProgress(completed: 3, total: 20)
    context.reportProgress(completed: 11, total: 20)
    context.post("half way", severity: .warning)
    return 1
  }
}

/// The process-wide instrument is one per process: its tests run one at a time.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ProcessWideInstrumentTests {
  @Test func aJobReportsItsStatusesMessagesAndTenthsOfProgress() async throws {
    let recorder = RecordingInstrument(namePrefix: "no attempts ")
    LoadInstrumentation.processWide = recorder
    defer { LoadInstrumentation.processWide = nil }
    let job = Job(InstrumentedWork())
    job.start()
    _ = try await job.output

    let mine = recorder.jobReports.filter { $0.job == InstrumentedWork.kind }
    #expect(Set(mine.map(\.id)).count == 1)
    let statuses = mine.compactMap { if case .status(let status) = $0.event { status } else { nil } }
    let messages = mine.compactMap { if case .message(let message) = $0.event { message.text } else { nil } }
    let tenths = mine.compactMap { if case .progress(let fraction) = $0.event { fraction } else { nil } }
    #expect(statuses == [.started, .succeeded])
    #expect(messages == ["half way"])
    #expect(tenths == [0.1, 0.5, 1.0])
  }

  @Test func theProcessWideInstrumentHearsOfEveryLoadable() async throws {
    let prefix = "process-wide \(UInt64.random(in: 0...UInt64.max)) "
    let recorder = RecordingInstrument(namePrefix: prefix)
    LoadInstrumentation.processWide = recorder
    defer { LoadInstrumentation.processWide = nil }
    let source = AsyncLoadable(name: prefix + "source") { 1 }
    let derived = source.map { $0 + 1 }.named(prefix + "derived")
    try await derived.load()
    LoadInstrumentation.processWide = nil
    #expect(LoadInstrumentation.processWide == nil)
    let later = AsyncLoadable(name: prefix + "later") { 1 }
    try await later.load()

    let mine = recorder.starts.filter { $0.name.hasPrefix(prefix) }
    #expect(mine.map(\.name).sorted() == [prefix + "derived", prefix + "source"])
    #expect(recorder.ends.filter { $0.attempt.name.hasPrefix(prefix) }.count == 2)
  }

  @Test func aLoadablesOwnInstrumentIsToldBeforeTheProcessWideOne() async throws {
    let order = Recorder<String>()
    let prefix = "both \(UInt64.random(in: 0...UInt64.max))"
    let own = RecordingInstrument { _ in order.append("own") }
    let global = RecordingInstrument(namePrefix: prefix) { report in
      if case .started(let attempt) = report, attempt.name == prefix { order.append("process-wide") }
    }
    LoadInstrumentation.processWide = global
    defer { LoadInstrumentation.processWide = nil }
    let loadable = AsyncLoadable(name: prefix) { 1 }
    loadable.instrument = own
    #expect(loadable.instrument != nil)
    try await loadable.load()
    #expect(order.values.prefix(2) == ["own", "process-wide"])
  }
}

@Suite(.timeLimit(.minutes(1))) struct ContentLoaderInstrumentTests {
  @Test func eachClaimIsReportedBeganAndEndedOnceAndKeysAreNamedByTheLoader() async throws {
    let recorder = RecordingInstrument()
    let items = ContentLoader<Int, String, Int>(name: "portal.item", instrument: recorder) { key in ("item \(key)", 1) }
    #expect(items.loadable(for: 7).displayName == "portal.item[7]")

    var claim: ContentLoader<Int, String, Int>.Claim? = items.begin(7)
    for await snapshot in claim!.updates where snapshot.status == .loaded { break }
    claim?.end()
    claim = nil  // the deinit ends it again: no second report
    let other = items.begin(8)
    _ = other  // ended by its deinit at the end of the scope
    _ = try await items.loadable(for: 8).fetch()

    recorder.expectBalanced()
    #expect(recorder.starts.map(\.name).contains("portal.item[7]"))
    #expect(recorder.ends(named: "portal.item[7]").count == 1)
    let seven = recorder.claimReports.filter { $0.claim.key == "7" }
    #expect(seven.map(\.began) == [true, false])
    #expect(seven.allSatisfy { $0.claim.loader == "portal.item" && $0.claim.description == "portal.item[7]" })
    #expect(Set(seven.map(\.claim.id)).count == 1)
  }

  @Test func aClaimDroppedWithoutEndIsReportedEndedOnce() {
    let recorder = RecordingInstrument()
    let items = ContentLoader<Int, String, Int>(name: "tiles", instrument: recorder) { key in ("tile \(key)", 1) }
    do { _ = items.begin(1) }
    #expect(recorder.claimReports.map(\.began) == [true, false])
  }
}

/// ``InstrumentedWork`` under another kind, so the process-wide test does not see its jobs.
struct OwnInstrumentedWork: JobWork {
  static let kind = "test.instrumented.own"
  func run(in context: JobContext<Int>) async throws -> Int { try await InstrumentedWork().run(in: context) }
}

@Suite(.timeLimit(.minutes(1))) struct JobInstrumentTests {
  @Test func aJobsOwnInstrumentFromItsOptionsHearsOfIt() async throws {
    let recorder = RecordingInstrument()
    let job = Job(OwnInstrumentedWork(), options: JobOptions(instrument: recorder))
    job.start()
    _ = try await job.output
    let statuses = recorder.jobReports.compactMap { if case .status(let status) = $0.event { status } else { nil } }
    #expect(statuses == [.started, .succeeded])
    #expect(recorder.jobReports.allSatisfy { $0.job == OwnInstrumentedWork.kind })
  }
}
