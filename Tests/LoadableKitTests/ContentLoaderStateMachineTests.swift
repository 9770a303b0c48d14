@testable import LoadableKit
import Testing

/// The loader's state machine, driven synchronously: no tasks run, effects are inspected.
@Suite("ContentLoader state machine")
struct ContentLoaderStateMachineTests {
  typealias Machine = ContentLoaderStateMachine<Int, String, Int>

  /// A task that does nothing, to attach to a load and find among the effects.
  private func placeholderTask() -> Task<Void, Never> { Task {} }

  /// Begins a claim, supplying `prior` when the machine asks for it.
  private func begin(
    _ machine: inout Machine, _ key: Int, prior: Machine.Prior? = nil
  ) -> (Machine.Entry, UInt64, Machine.Effects) {
    var outcome = machine.begin(key, sink: nil, prior: .notFetched)
    if case .needsPrior = outcome { outcome = machine.begin(key, sink: nil, prior: .fetched(prior)) }
    guard case .begun(let entry, let id, let effects) = outcome else { fatalError("a fetched prior always begins") }
    return (entry, id, effects)
  }

  @Test func theFirstClaimAsksForThePriorThenStartsOneLoad() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: nil, maximumIdleCount: 10)
    guard case .needsPrior = machine.begin(1, sink: nil, prior: .notFetched) else {
      Issue.record("a new key needs its prior value first")
      return
    }
    let (entry, _, effects) = begin(&machine, 1, prior: ("cached", 4))
    #expect(effects.startLoads.count == 1)
    #expect(entry.snapshot.description == "Snapshot(1: loading, value: cached, version: 4)")
    let (same, _, more) = begin(&machine, 1)
    #expect(same === entry && more.startLoads.isEmpty)
  }

  @Test func theLastEndCancelsRestoresAndEvictsBeyondTheCount() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: nil, maximumIdleCount: 1)
    let (first, firstClaim, firstEffects) = begin(&machine, 1)
    let task = placeholderTask()
    let cancelAtOnce = machine.attach(task, toLoad: firstEffects.startLoads[0].id, of: first)
    #expect(!cancelAtOnce)
    let ended = machine.end(first, claimID: firstClaim, now: .seconds(1))
    #expect(ended.cancelTasks.count == 1 && first.status == .notLoaded && first.isIdleLinked)
    let again = machine.end(first, claimID: firstClaim, now: .seconds(2))
    #expect(again.cancelTasks.isEmpty && !again.drain)  // idempotent

    let (second, secondClaim, _) = begin(&machine, 2)
    let evicting = machine.end(second, claimID: secondClaim, now: .seconds(3))
    #expect(evicting.released.map(\.key) == [1])  // least recently idle goes first
    #expect(machine.count == 1 && machine.idleCount == 1 && !first.isInIndex)
  }

  @Test func aLateResultOfACancelledLoadChangesNothing() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: nil, maximumIdleCount: 10)
    let (entry, claim, effects) = begin(&machine, 1)
    let loadID = effects.startLoads[0].id
    _ = machine.end(entry, claimID: claim, now: .zero)
    let late = machine.finish(entry, load: loadID, with: .success(("late", 9)), now: .zero)
    #expect(late.startLoads.isEmpty && late.resumes.isEmpty && !late.drain)
    #expect(entry.value == nil && entry.status == .notLoaded)
    // The cancelled load's task, attached late, is cancelled at once.
    let cancelAtOnce = machine.attach(placeholderTask(), toLoad: loadID, of: entry)
    #expect(cancelAtOnce)
  }

  @Test func theIdleListNeverGoesBackInTime() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: .seconds(10), maximumIdleCount: 10)
    let (a, aClaim, _) = begin(&machine, 1)
    let (b, bClaim, _) = begin(&machine, 2)
    let first = machine.end(a, claimID: aClaim, now: .seconds(5))
    #expect(first.startSweeper == .seconds(15))
    // Read before the lock by a slower caller: an earlier time arrives second.
    let second = machine.end(b, claimID: bClaim, now: .seconds(4))
    #expect(second.startSweeper == nil && b.idleSince == .seconds(5))
    let (next, swept) = machine.sweep(now: .seconds(15))
    #expect(next == nil && swept.released.map(\.key).sorted() == [1, 2] && machine.count == 0)
  }

  @Test func atMostTwoLoadsOfAKeyRun() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: nil, maximumIdleCount: 10)
    let (entry, _, started) = begin(&machine, 1)
    let firstTask = placeholderTask()
    _ = machine.attach(firstTask, toLoad: started.startLoads[0].id, of: entry)
    let second = machine.refresh(1)
    #expect(second.startLoads.count == 1 && second.cancelTasks.isEmpty)
    let third = machine.refresh(1)
    #expect(third.startLoads.count == 1 && third.cancelTasks.count == 1)
    #expect(entry.current != nil && entry.superseded != nil)
  }

  @Test func oneCallerAtATimeDeliversAndHandsBackTheRole() {
    var machine = Machine(gracePeriod: .zero, idleTimeout: nil, maximumIdleCount: 10)
    let (stream, continuation) = AsyncStream.makeStream(of: Machine.Event.self)
    _ = stream
    _ = machine.addEventSink(continuation)
    let (_, _, first) = begin(&machine, 1)
    let (_, _, second) = begin(&machine, 2)
    #expect(first.drain && !second.drain)  // the first caller delivers both
    let batch = machine.takeOutbox()
    let empty = machine.takeOutbox()
    #expect(batch?.count == 2)
    #expect(empty == nil)  // and gives the role back
    let (_, _, third) = begin(&machine, 3)
    #expect(third.drain)
  }
}
