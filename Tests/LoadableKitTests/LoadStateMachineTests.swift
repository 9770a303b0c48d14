@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The attempt state machine alone, synchronously: no task, no lock, no clock. Each event is
/// called on a value and its decision or effects are checked; the waiters are completion
/// handlers that record what they were answered, so exactly-once answering is checked too.
@Suite("Load state machine", .timeLimit(.minutes(1)))
struct LoadStateMachineTests {
  /// The answers each waiter got, by its identifier.
  final class Answers: Sendable {
    private let storage = Mutex<[UInt64: [String]]>([:])
    func record(_ id: UInt64, _ answer: String) { storage.withLock(owner: self) { $0[id, default: []].append(answer) } }
    subscript(id: UInt64) -> [String] { storage.withLock(owner: self) { $0[id] ?? [] } }
    var all: [UInt64: [String]] { storage.withLock(owner: self) { $0 } }
  }

  static func machine(_ status: LoadStatus) -> LoadStateMachine {
    switch status {
    case .notLoaded: LoadStateMachine(.notLoaded, content: Int?.none)
    case .loaded: LoadStateMachine(.loaded, content: 1)
    case .failed: LoadStateMachine(.failed(Boom(code: 1)), content: Int?.none)
    case .loading:
      {
        var machine = LoadStateMachine(.loaded, content: 1)
        _ = machine.decide(.sync, needsSync: true, waiter: nil, byDependent: false, callerCancelled: false)
        return machine
      }()
    }
  }

  static func waiter(_ answers: Answers) -> (id: UInt64, waiter: LoadWaiter) {
    let id = nextUniqueID()
    return (id, .completion { error in answers.record(id, error.map { "\($0)" } ?? "ok") })
  }

  /// What a decision is, in a word.
  static func kind(_ decision: LoadDecision) -> String {
    switch decision {
    case .content: "content"
    case .failure: "failure"
    case .joined: "joined"
    case .started: "started"
    case .none: "none"
    }
  }

  /// The SPEC §1 table, cell by cell, on the machine: what each request decides in each state,
  /// and the status it leaves (`needsSync` false, so the if-needed requests answer from content).
  static let table: [(LoadRequest, LoadStatus, decision: String, after: LoadStatus)] = [
    (.load, .notLoaded, "started", .loading), (.load, .loading, "joined", .loading),
    (.load, .loaded, "content", .loaded), (.load, .failed, "failure", .failed),
    (.retry, .notLoaded, "started", .loading), (.retry, .loading, "joined", .loading),
    (.retry, .loaded, "content", .loaded), (.retry, .failed, "started", .loading),
    (.sync, .notLoaded, "started", .loading), (.sync, .loading, "none", .loading),
    (.sync, .loaded, "started", .loading), (.sync, .failed, "started", .loading),
    (.syncIfNeeded, .notLoaded, "started", .loading), (.syncIfNeeded, .loading, "none", .loading),
    (.syncIfNeeded, .loaded, "none", .loaded), (.syncIfNeeded, .failed, "started", .loading),
    (.fetch, .notLoaded, "started", .loading), (.fetch, .loading, "joined", .loading),
    (.fetch, .loaded, "started", .loading), (.fetch, .failed, "started", .loading),
    (.fetchIfNeeded, .notLoaded, "started", .loading), (.fetchIfNeeded, .loading, "content", .loading),
    (.fetchIfNeeded, .loaded, "content", .loaded), (.fetchIfNeeded, .failed, "started", .loading),
  ]

  @Test(arguments: 0..<table.count)
  func eachRequestInEachStateDecidesAsTheTableSays(_ row: Int) {
    let (request, status, expected, after) = Self.table[row]
    var machine = Self.machine(status)
    let needsSync = status == .notLoaded || status == .failed
    let answers = Answers()
    let waiter = request.waits ? Self.waiter(answers) : nil
    let (decision, event) = machine.decide(request, needsSync: needsSync, waiter: waiter, byDependent: false, callerCancelled: false)
    #expect(Self.kind(decision) == expected, "\(request) on \(status)")
    #expect(machine.status == after, "\(request) on \(status)")
    #expect((event != nil) == (after != status), "a status event exactly when the status changed")
    #expect((machine.attempt != nil) == (machine.status == .loading), "loading ⇔ an attempt")
    if case .started(let attempt) = decision {
      #expect(attempt === machine.attempt)
      #expect(attempt.intent == request.intent)
      #expect(attempt.waitingCount == (request.waits ? 1 : 0))
    }
    #expect(answers.all.isEmpty, "deciding answers nobody")
  }

  /// The events other than requests, each in each state: the status and the content it leaves.
  /// `loading` is a refresh of the content 1 that a caller wanted; the idle states' content is
  /// 1 when loaded, none otherwise. `finish` in an idle state is a stale attempt's result.
  static let eventTable: [(event: String, before: LoadStatus, after: LoadStatus, content: Int?)] = [
    ("finish-success", .notLoaded, .notLoaded, nil), ("finish-success", .loading, .loaded, 7),
    ("finish-success", .loaded, .loaded, 1), ("finish-success", .failed, .failed, nil),
    ("finish-failure", .notLoaded, .notLoaded, nil), ("finish-failure", .loading, .failed, 1),
    ("finish-failure", .loaded, .loaded, 1), ("finish-failure", .failed, .failed, nil),
    ("cancel", .notLoaded, .notLoaded, nil), ("cancel", .loading, .failed, 1),
    ("cancel", .loaded, .loaded, 1), ("cancel", .failed, .failed, nil),
    ("write", .notLoaded, .loaded, 8), ("write", .loading, .loaded, 8),
    ("write", .loaded, .loaded, 8), ("write", .failed, .loaded, 8),
    ("forget", .notLoaded, .notLoaded, nil), ("forget", .loading, .loading, nil),
    ("forget", .loaded, .notLoaded, nil), ("forget", .failed, .notLoaded, nil),
    ("supersede", .notLoaded, .notLoaded, nil), ("supersede", .loading, .loading, 1),
    ("supersede", .loaded, .loaded, 1), ("supersede", .failed, .failed, nil),
    ("interest", .notLoaded, .loading, nil), ("interest", .loading, .loading, 1),
    ("interest", .loaded, .loading, 1), ("interest", .failed, .loading, nil),
    ("update-success", .notLoaded, .notLoaded, 9), ("update-success", .loading, .loading, 9),
    ("update-success", .loaded, .loaded, 9), ("update-success", .failed, .failed, 9),
    ("update-failure", .notLoaded, .failed, nil), ("update-failure", .loading, .loading, 1),
    ("update-failure", .loaded, .failed, 1), ("update-failure", .failed, .failed, nil),
  ]

  @Test(arguments: 0..<eventTable.count)
  func eachEventInEachStateDoesAsTheTableSays(_ row: Int) {
    let (name, before, after, content) = Self.eventTable[row]
    var machine = Self.machine(before)
    let running = machine.attempt
    var event: LoadStatusEvent?
    switch name {
    case "finish-success", "finish-failure":
      // In an idle state, the result of an attempt that is not current (a stale one).
      var other = Self.machine(.notLoaded)
      _ = other.decide(.load, needsSync: true, waiter: nil, byDependent: false, callerCancelled: false)
      guard let attempt = running ?? other.attempt else {
        Issue.record("no attempt")
        return
      }
      let result: Result<AnyContentBox, any Error> = name == "finish-success" ? .success(ContentBox(7)) : .failure(Boom(code: 7))
      event = machine.finish(attempt, with: result, now: .now).event
    case "cancel": event = machine.cancel().effects?.event
    case "write":
      switch machine.write(ContentBox(8)) {
      case .wrote(let effects):
        event = effects.event
        #expect(running == nil, "a write supersedes the attempt that runs")
      case .superseded(let old, let effects):
        event = effects.event
        #expect(old === running && effects.endedAttempt && !effects.attemptCommitted, "the write supersedes the running attempt")
      }
    case "forget":
      switch machine.forget() {
      case .cleared(let effects):
        event = effects.event
        #expect(running == nil, "forget clears only when nothing runs")
      case .superseded(let fresh, let old, let effects):
        event = effects.event
        #expect(fresh === machine.attempt && old === running && fresh !== old, "the fresh attempt takes the place")
      }
    case "supersede":
      if case .superseded(let fresh, let old, _) = machine.supersede(intent: .load) {
        #expect(fresh === machine.attempt && old === running && fresh !== old, "the fresh attempt takes the place")
      } else {
        #expect(running == nil, "a running attempt with another intent is superseded")
      }
    case "interest":
      let outcome = machine.addInterest(starting: .load)
      event = outcome.event
      #expect(outcome.held === machine.attempt && machine.attempt?.interest == 1)
    case "update-success":
      let action = machine.update(.success(ContentBox(9)))
      event = action.effects.event
      if case .recomputed = action {} else { Issue.record("update-success on \(before): \(action), not recomputed") }
    case "update-failure":
      let action = machine.update(.failure(Boom(code: 9)))
      event = action.effects.event
      switch action {
      case .none: #expect(running != nil, "a live failure is dropped only while an attempt runs")
      case .failed: #expect(running == nil, "a live failure fails the loadable only while idle")
      case .recomputed: Issue.record("update-failure on \(before): recomputed")
      }
    default:
      Issue.record("unknown event \(name)")
      return
    }
    #expect(machine.status == after, "\(name) on \(before)")
    #expect(machine.content(as: Int.self) == content, "\(name) on \(before): the content")
    #expect((event != nil) == (after != before), "\(name) on \(before): an event exactly when the status changed")
    #expect((machine.attempt != nil) == (machine.status == .loading), "loading ⇔ an attempt")
    #expect((machine.error != nil) == (machine.status == .failed), "failed ⇔ an error")
  }

  @Test(arguments: [LoadRequest.load, .retry, .fetch, .fetchIfNeeded])
  func aCancelledCallerNeverWaits(_ request: LoadRequest) {
    for status in [LoadStatus.notLoaded, .loading] {
      var machine = Self.machine(status)
      let attempt = machine.attempt
      let answers = Answers()
      let (decision, _) = machine.decide(
        request, needsSync: true, waiter: Self.waiter(answers), byDependent: false, callerCancelled: true)
      #expect(Self.kind(decision) == "failure", "\(request) on \(status)")
      #expect(machine.attempt === attempt, "no attempt started or joined")
      #expect((attempt?.waitingCount ?? 0) == 0)
    }
  }

  @Test func finishingAnswersEveryWaiterOnceAndStoresTheOutcome() {
    for succeeds in [true, false] {
      var machine = Self.machine(.loaded)
      let answers = Answers()
      let first = Self.waiter(answers)
      let second = Self.waiter(answers)
      guard case (.started(let attempt), _) = machine.decide(
        .fetch, needsSync: true, waiter: first, byDependent: false, callerCancelled: false)
      else { Issue.record("not started"); return }
      _ = machine.decide(.load, needsSync: true, waiter: second, byDependent: false, callerCancelled: false)
      let result: Result<AnyContentBox, any Error> = succeeds ? .success(ContentBox(2)) : .failure(Boom(code: 2))
      let effects = machine.finish(attempt, with: result, now: .now)
      for case let (_, waiter)? in effects.waiters { waiter.resume(with: effects.result) }
      #expect(answers[first.id].count == 1 && answers[second.id].count == 1)
      #expect(machine.attempt == nil)
      #expect(machine.status == (succeeds ? .loaded : .failed))
      #expect(machine.content(as: Int.self) == (succeeds ? 2 : 1), "a failed refresh keeps the content")
      #expect((machine.error != nil) == !succeeds)
      #expect(effects.changedContent == succeeds && effects.endedAttempt)
      #expect(effects.released.attempt === attempt, "the ended attempt is released after the lock")
    }
  }

  @Test func aResultForAnAttemptThatIsNoLongerCurrentIsDropped() {
    var machine = Self.machine(.notLoaded)
    let answers = Answers()
    guard case (.started(let cancelled), _) = machine.decide(
      .load, needsSync: true, waiter: Self.waiter(answers), byDependent: false, callerCancelled: false)
    else { Issue.record("not started"); return }
    guard case .ended(let cancel) = machine.cancel() else { Issue.record("not cancelled"); return }
    for case let (_, waiter)? in cancel.waiters { waiter.resume(with: cancel.result) }
    #expect(machine.status == .failed && machine.error is CancellationError)
    #expect(cancel.cancel.isNone && cancel.endedAttempt && !cancel.attemptCommitted)
    // A retry starts anew; the cancelled attempt's late result changes nothing.
    guard case (.started(let retry), _) = machine.decide(
      .retry, needsSync: true, waiter: Self.waiter(answers), byDependent: false, callerCancelled: false)
    else { Issue.record("not started"); return }
    let late = machine.finish(cancelled, with: .success(ContentBox(9)), now: .now)
    #expect(late.waiters.first == nil && late.event == nil && !late.changedContent)
    #expect(machine.attempt === retry && machine.status == .loading && machine.content(as: Int.self) == nil)
    #expect(cancelled.finished)
  }

  @Test func cancelWithNothingRunningDoesNothing() {
    for status in [LoadStatus.notLoaded, .loaded, .failed] {
      var machine = Self.machine(status)
      let action = machine.cancel()
      #expect(machine.status == status && action.effects == nil, "nothing to do")
    }
  }

  @Test func theLastWaiterLeavingADependentsAttemptRestoresTheLoadable() {
    var machine = Self.machine(.loaded)
    let answers = Answers()
    let first = Self.waiter(answers)
    let second = Self.waiter(answers)
    guard case (.started(let attempt), _) = machine.decide(
      .fetch, needsSync: true, waiter: first, byDependent: true, callerCancelled: false)
    else { Issue.record("not started"); return }
    _ = machine.decide(.fetch, needsSync: true, waiter: second, byDependent: true, callerCancelled: false)
    // The waiters here are completion handlers, which make an attempt wanted; a dependent's wait
    // (`LoadWaiter.dependent`) does not, and that is the case this test is about.
    attempt.standing = .forDependents
    // One of two leaves: the attempt goes on for the other.
    let (left, none) = machine.removeWaiter(first.id).parts
    #expect(left != nil && none == nil && machine.attempt === attempt)
    #expect(machine.removeWaiter(first.id).parts.waiter == nil, "a waiter leaves once")
    // The last leaves: nobody else wants it, so it is cancelled and the loadable put back.
    let (last, effects) = machine.removeWaiter(second.id).parts
    #expect(last != nil)
    #expect(effects?.endedAttempt == true && effects?.attemptCommitted == false)
    #expect(machine.attempt == nil && machine.status == .loaded && machine.content(as: Int.self) == 1)
  }

  @Test func anAttemptASyncAlsoWantedIsNotUndoneWhenItsDependentLeaves() {
    var machine = Self.machine(.loaded)
    let answers = Answers()
    let dependent = Self.waiter(answers)
    guard case (.started(let attempt), _) = machine.decide(
      .fetch, needsSync: true, waiter: dependent, byDependent: true, callerCancelled: false)
    else { Issue.record("not started"); return }
    attempt.standing = .forDependents  // as a dependent's wait leaves it (see above)
    _ = machine.decide(.sync, needsSync: true, waiter: nil, byDependent: false, callerCancelled: false)
    let (left, effects) = machine.removeWaiter(dependent.id).parts
    #expect(left != nil && effects == nil)
    #expect(machine.attempt === attempt && machine.status == .loading)
  }

  @Test func aRaiseBeforeTheTaskExistsIsKeptForIt() {
    var machine = Self.machine(.notLoaded)
    guard case (.started(let attempt), _) = machine.decide(
      .sync, needsSync: true, waiter: nil, byDependent: false, callerCancelled: false)
    else { Issue.record("not started"); return }
    #expect(machine.escalate(to: .high).isNone, "no runner to raise yet")
    let (cancel, escalate) = machine.attach(.task(Task {}), to: attempt)
    #expect(!cancel)
    #expect(escalate == RawPriority(.high))
    guard case .task = machine.escalate(to: .high) else {
      Issue.record("once attached, a raise goes to the attempt's task")
      return
    }
  }

  // MARK: - Supersede (SPEC §5)

  @Test func supersedeWithNothingRunningIsIdle() {
    for status in [LoadStatus.notLoaded, .loaded, .failed] {
      var machine = Self.machine(status)
      guard case .idle = machine.supersede(intent: .refresh) else {
        Issue.record("\(status): not idle")
        continue
      }
      #expect(machine.status == status && machine.attempt == nil)
    }
  }

  /// The fresh attempt takes the running one's place and its waiters, nobody is answered, the
  /// old task is cancelled, and the old attempt's result, when it comes, is dropped.
  @Test func aFreshAttemptTakesTheRunningOnesPlaceAndItsWaiters() {
    var machine = Self.machine(.loaded)
    let answers = Answers()
    let first = Self.waiter(answers)
    let second = Self.waiter(answers)
    guard case (.started(let old), _) = machine.decide(
      .fetch, needsSync: true, waiter: first, byDependent: false, callerCancelled: false)
    else { Issue.record("not started"); return }
    _ = machine.decide(.load, needsSync: true, waiter: second, byDependent: false, callerCancelled: false)
    // Its work started (its context is set): a refresh cannot count as the same one.
    let owner = AsyncLoadable(content: 0)
    old.context = AttemptContext(owner: owner, intent: .refresh, attemptID: old.id, onTask: false)
    guard case .superseded(let fresh, let superseded, let effects) = machine.supersede(intent: .refresh) else {
      Issue.record("not superseded"); return
    }
    #expect(superseded === old && machine.attempt === fresh && fresh !== old)
    #expect(machine.status == .loading && effects.event == nil && effects.waiters.first == nil)
    #expect(fresh.waitingCount == 2 && old.waitingCount == 0, "the waiters moved")
    #expect(answers.all.isEmpty, "nobody answered, failed or cancelled")
    let late = machine.finish(old, with: .success(ContentBox(99)), now: .now)
    #expect(late.event == nil && late.waiters.first == nil && machine.content(as: Int.self) == 1, "the stale result is dropped")
    let done = machine.finish(fresh, with: .success(ContentBox(2)), now: .now)
    for case let (_, waiter)? in done.waiters { waiter.resume(with: done.result) }
    #expect(answers[first.id] == ["ok"] && answers[second.id] == ["ok"])
    #expect(machine.status == .loaded && machine.content(as: Int.self) == 2)
  }

  @Test func aRefreshBeforeTheRunningRefreshStartedCountsAsOne() {
    var machine = Self.machine(.loaded)
    guard case (.started(let running), _) = machine.decide(
      .sync, needsSync: true, waiter: nil, byDependent: false, callerCancelled: false)
    else { Issue.record("not started"); return }
    guard case .coalesced(let attempt) = machine.supersede(intent: .refresh) else {
      Issue.record("not coalesced"); return
    }
    #expect(attempt === running && machine.attempt === running)
  }

  // MARK: - A seeded random walk

  /// Events in random order, from every state, with the invariants checked after each step:
  /// loading exactly when an attempt runs; an error exactly when failed; the content version
  /// never goes back; every waiter answered at most once, and each once its attempt ended; a
  /// status event exactly when the status changed.
  @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
  func aRandomWalkKeepsTheInvariants(seed: UInt64) {
    var generator = SplitMix64(seed: seed)
    var machine = Self.machine(.notLoaded)
    let answers = Answers()
    var waiting: [UInt64] = []  // waiters of the current attempt
    var answered: Set<UInt64> = []  // answered through the machine's effects or a leave
    var stale: [RunningAttempt] = []
    var interest: [RunningAttempt] = []  // units of interest held (a key's claims)
    var version = machine.contentVersion

    func settle(_ effects: LoadEffects) {
      for case let (id, waiter)? in effects.waiters {
        waiter.resume(with: effects.result)
        answered.insert(id)
      }
    }

    for step in 0..<2_000 {
      let before = machine.status
      var event: LoadStatusEvent?
      switch generator.next() % 13 {
      case 0, 1:
        let request = [LoadRequest.load, .retry, .fetch, .fetchIfNeeded, .sync, .syncIfNeeded][Int(generator.next() % 6)]
        let waiter = request.waits ? Self.waiter(answers) : nil
        let previous = machine.attempt
        let (decision, changed) = machine.decide(
          request, needsSync: generator.next() % 2 == 0, waiter: waiter, byDependent: generator.next() % 3 == 0,
          callerCancelled: false)
        event = changed
        switch decision {
        case .started:
          if let previous { stale.append(previous) }
          if let waiter { waiting = [waiter.id] } else { waiting = [] }
        case .joined:
          if let waiter { waiting.append(waiter.id) }
        case .content, .failure, .none:
          break  // answered by the caller at once, not through the machine
        }
      case 2, 3:
        guard let attempt = machine.attempt else { continue }
        let result: Result<AnyContentBox, any Error> =
          generator.next() % 2 == 0 ? .success(ContentBox(step)) : .failure(Boom(code: step))
        let effects = machine.finish(attempt, with: result, now: .now)
        event = effects.event
        settle(effects)
        stale.append(attempt)
        waiting = []
      case 4:
        let running = machine.attempt
        switch machine.cancel() {
        case .none:
          #expect(running == nil, "step \(step): cancel does nothing only when nothing runs")
        case .ended(let effects):
          #expect(effects.released.attempt === running, "step \(step): cancel ends the running attempt")
          event = effects.event
          if let attempt = effects.released.attempt { stale.append(attempt) }
          settle(effects)
        }
        waiting = []
      case 5:
        guard !waiting.isEmpty else { continue }
        let id = waiting.remove(at: Int(generator.next() % UInt64(waiting.count)))
        let (waiter, effects) = machine.removeWaiter(id).parts
        waiter?.resume(with: .failure(CancellationError()))
        if waiter != nil { answered.insert(id) }
        if let effects {
          event = effects.event
          settle(effects)
          if let attempt = effects.released.attempt { stale.append(attempt) }
          waiting = []
        }
      case 6:
        guard let attempt = stale.randomElement(using: &generator) else { continue }
        let effects = machine.finish(attempt, with: .success(ContentBox(-1)), now: .now)
        #expect(effects.event == nil && effects.waiters.first == nil, "a stale attempt's result is dropped")
      case 7:
        // A keyed refresh supersedes the running attempt: the fresh one takes its waiters.
        let intent = [LoadIntent.load, .refresh][Int(generator.next() % 2)]
        switch machine.supersede(intent: intent) {
        case .idle:
          #expect(machine.attempt == nil, "step \(step): supersede idle only when nothing runs")
        case .coalesced(let attempt):
          #expect(attempt === machine.attempt)
        case .superseded(let fresh, let superseded, _):
          #expect(fresh === machine.attempt && fresh !== superseded, "step \(step): the fresh attempt is current")
          #expect(superseded.waitingCount == 0, "step \(step): the superseded attempt keeps no waiter")
          stale.append(superseded)
        }
      case 8:
        // A local write: loaded with the written content, every waiter answered with it.
        let value = 1_000_000 + step
        let running = machine.attempt
        let action = machine.write(ContentBox(value))
        let effects = action.effects
        event = effects.event
        if case .superseded(let superseded, _) = action {
          #expect(superseded === running, "step \(step): the write supersedes the running attempt")
        } else {
          #expect(running == nil, "step \(step): a write supersedes the attempt that runs")
        }
        settle(effects)
        if let attempt = effects.released.attempt { stale.append(attempt) }
        waiting = []
        #expect(machine.status == .loaded && machine.content(as: Int.self) == value, "step \(step): the write is shown")
        if case .success(let delivery) = effects.result {
          #expect(delivery.content(as: Int.self) == value, "step \(step): waiters get the written content")
        } else {
          Issue.record("step \(step): a write answered its waiters with a failure")
        }
      case 9:
        // The content dropped (a key removed): a running attempt is superseded, nobody is failed.
        let running = machine.attempt
        switch machine.forget() {
        case .cleared(let effects):
          event = effects.event
          #expect(running == nil && machine.status == .notLoaded, "step \(step): forget clears only when nothing runs")
          #expect(effects.waiters.first == nil, "step \(step): forget answers nobody")
        case .superseded(let fresh, let superseded, let effects):
          event = effects.event
          stale.append(superseded)
          #expect(superseded === running, "step \(step): forget supersedes the running attempt")
          #expect(fresh === machine.attempt && machine.status == .loading, "step \(step): the fresh attempt is current")
          #expect(superseded.waitingCount == 0, "step \(step): the superseded attempt keeps no waiter")
          #expect(effects.waiters.first == nil, "step \(step): forget answers nobody")
        }
        #expect(machine.content(as: Int.self) == nil, "step \(step): the content is dropped")
      case 10:
        // A key's claims: one unit of interest in the running attempt, or in one it starts.
        let outcome = machine.addInterest(starting: generator.next() % 2 == 0 ? .load : nil)
        event = outcome.event
        if outcome.started != nil { waiting = [] }
        if let held = outcome.held { interest.append(held) }
      case 11:
        // A claim ends: when nobody else wants the attempt it held, the loadable goes back.
        guard !interest.isEmpty else { continue }
        let held = interest.remove(at: Int(generator.next() % UInt64(interest.count)))
        let wasCurrent = held === machine.attempt
        // Read before: an attempt that ends hands what it held of the loadable before it to the
        // effects (`takePrevious()`).
        let statusBefore = held.previousOutcomeStatus
        let effects = machine.removeInterest(from: held).effects ?? LoadEffects()
        event = effects.event
        settle(effects)
        if effects.endedAttempt {
          #expect(wasCurrent && machine.attempt == nil, "step \(step): only the current attempt is undone")
          #expect(statusBefore == machine.status, "step \(step): undoing restores the status before it")
          stale.append(held)
          waiting = []
        }
      default:
        // A live view recomputed while idle: the content (one more version) or a failure.
        guard machine.attempt == nil else {
          let action = machine.update(.failure(Boom(code: step)))
          if case .none = action {} else { Issue.record("step \(step): a live failure during an attempt did \(action)") }
          #expect(machine.status == .loading, "step \(step): a live failure waits for the attempt")
          continue
        }
        let succeeds = generator.next() % 2 == 0
        let action = machine.update(succeeds ? .success(ContentBox(step)) : .failure(Boom(code: step)))
        event = action.effects.event
        switch action {
        case .recomputed: #expect(succeeds, "step \(step): only new content is recomputed")
        case .failed: #expect(!succeeds, "step \(step): only an error fails")
        case .none: Issue.record("step \(step): a live update while idle did nothing")
        }
        #expect(machine.status == (succeeds ? before : .failed), "step \(step): a live update's status")
      }
      // The invariants.
      #expect((machine.status == .loading) == (machine.attempt != nil), "step \(step): loading ⇔ an attempt")
      #expect(machine.status != .failed || machine.error != nil, "step \(step): failed ⇒ an error")
      #expect((event != nil) == (machine.status != before), "step \(step): an event ⇔ a change")
      #expect(machine.contentVersion >= version, "step \(step): the content version never goes back")
      version = machine.contentVersion
      #expect(machine.content(as: Int.self) != -1, "step \(step): a stale result never lands")
      #expect((machine.attempt?.waitingCount ?? 0) == waiting.count, "step \(step): the waiters are those that joined")
      if stale.count > 64 { stale.removeFirst(32) }
    }
    // Every waiter that joined was answered exactly once when its attempt ended or it left, and
    // those of the attempt still running not yet.
    let all = answers.all
    #expect(all.values.allSatisfy { $0.count == 1 }, "a waiter answered twice")
    #expect(Set(all.keys) == answered, "answered exactly those the effects and leaves named")
    #expect(answered.isDisjoint(with: waiting), "a waiter still waiting was answered")
  }
}

extension RunningAttempt {
  /// The status the loadable had before this attempt (what a cascade restores).
  var previousOutcomeStatus: LoadStatus {
    switch previousOutcome {
    case .notLoaded: .notLoaded
    case .loaded: .loaded
    case .failed: .failed
    }
  }
}

extension EndAction {
  /// The effects, when the attempt ended.
  var effects: LoadEffects? {
    if case .ended(let effects) = self { return effects }
    return nil
  }
}

extension LeaveAction {
  /// The waiter that left, if it was there, and the effects, when its leaving undid the attempt.
  var parts: (waiter: LoadWaiter?, effects: LoadEffects?) {
    switch self {
    case .gone: (nil, nil)
    case .left(let waiter): (waiter, nil)
    case .leftLast(let waiter, let effects): (waiter, effects)
    }
  }
}
