import Foundation
@testable import LoadableKit
import Testing

/// The job's state machine and its helpers, tested synchronously as values.
@Suite("Jobs: state machine", .timeLimit(.minutes(1)))
struct JobsStateMachineTests {
  typealias Machine = JobStateMachine<Int, Int>

  @Test func startPauseCancelFromEachStatus() {
    // notStarted
    var machine = Machine()
    #expect(machine.pause().0 == false)
    var (started, effects) = machine.start()
    #expect(started)
    #expect(effects.launch == 1)
    #expect(effects.changes.contains(.status))
    #expect(machine.status == .started)
    #expect(machine.activity == .running)
    #expect(machine.start().0 == false)

    // started → paused → started: the running task goes on; no second launch.
    #expect(machine.pause().0)
    #expect(machine.status == .paused)
    #expect(machine.isUnsettled, "paused with work that has not reached a pause point")
    #expect(machine.pause().0 == false)
    (started, effects) = machine.start()
    #expect(started)
    #expect(effects.launch == nil)

    // started → canceling; a second cancel joins.
    let (outcome, _) = machine.cancel()
    #expect(outcome == .canceling)
    #expect(machine.status == .canceling)
    #expect(machine.cancel().0 == .alreadyCanceling)
    #expect(machine.start().0 == false)
    #expect(machine.pause().0 == false)

    // The run ends with an output; the job was canceling, so it fails and drops the output.
    effects = machine.finish(runID: 1, with: .success(42))
    #expect(machine.status == .failed)
    #expect(heldError(machine) is CancellationError, "held until the run's attempt holds it")
    #expect(effects.result.map { (try? $0.get()) == nil } == true)
    #expect(machine.cancel().0 == .nothing)
    #expect(machine.start().0 == false)
  }

  @Test func aStaleRunCannotFinishTheJob() {
    var machine = Machine()
    _ = machine.start()
    let effects = machine.finish(runID: 7, with: .success(1))
    #expect(effects.result == nil)
    #expect(machine.status == .started)
  }

  @Test func cancelWithoutARunningTaskEndsAtOnce() {
    var machine = Machine()
    #expect(machine.cancel().0 == .cancelled)
    #expect(machine.status == .failed)

    var restored = Machine(status: .paused, checkpoint: 3)
    #expect(restored.isUnsettled == false, "nothing is running")
    #expect(restored.cancel().0 == .cancelled)
    #expect(restored.status == .failed)
  }

  @Test func aRestoredPausedJobLaunchesARunOnStart() {
    var machine = Machine(status: .paused, checkpoint: 3, progress: 0.3)
    let (started, effects) = machine.start()
    #expect(started)
    #expect(effects.launch != nil)
    #expect(machine.checkpoint == 3)
  }

  @Test func successSetsProgressToOne() {
    var machine = Machine()
    _ = machine.start()
    machine.progress = 0.4
    _ = machine.finish(runID: 1, with: .success(5))
    #expect(machine.progress == 1)
    #expect(machine.status == .succeeded)
    #expect(heldError(machine) == nil)
  }

  /// A job's failure is stored once: the state holds it only until the run's attempt does
  /// (`runConcluded()`); after that, the job reads it from the run. A job restored after it failed
  /// keeps the error it was saved with, as its run holds `outputNotPersisted` instead.
  @Test func theStateLetsGoOfAFailureOnceTheRunHoldsIt() {
    struct Failure: Error {}
    var machine = Machine()
    _ = machine.start()
    let effects = machine.finish(runID: 1, with: .failure(Failure()))
    #expect(effects.result?.failure is Failure, "the run is concluded with the failure")
    #expect(heldError(machine) is Failure)
    #expect(machine.snapshot().error is Failure)
    #expect(machine.runConcluded()?.failure is Failure)
    #expect(machine.status == .failed)
    #expect(isInRun(machine.failure), "the run's attempt holds it now, and the state no copy")
    #expect(machine.snapshot(runOutcome: .failure(CancellationError())).error is CancellationError)

    let restored = Machine(status: .failed, error: Failure())
    #expect(heldError(restored) is Failure)
    #expect(restored.snapshot(runOutcome: .failure(CancellationError())).error is Failure)

    var succeeded = Machine()
    _ = succeeded.start()
    _ = succeeded.finish(runID: 1, with: .success(1))
    _ = succeeded.runConcluded()
    #expect(heldError(succeeded) == nil)
    #expect(!isInRun(succeeded.failure))
  }

  @Test func checkpointsCountGenerationsAndStopAfterTheEnd() {
    var machine = Machine()
    _ = machine.start()
    #expect(machine.saveCheckpoint(1).released.checkpoint == nil)
    // The replaced checkpoint leaves with the effects, to be released after the lock.
    #expect(machine.saveCheckpoint(2).released.checkpoint == 1)
    #expect(machine.checkpoint == 2)
    #expect(machine.checkpointGeneration == 2)
    _ = machine.finish(runID: 1, with: .success(0))
    #expect(machine.saveCheckpoint(3).released.checkpoint == nil)
    #expect(machine.checkpoint == 2, "a finished job's checkpoint is final")
  }

  @Test func backoffIsRefusedWhileCanceling() {
    var machine = Machine()
    _ = machine.start()
    let message = JobMessage("retry", severity: .warning)
    #expect(machine.beginBackoff(runID: 1, message: message).0)
    #expect(machine.activity == .backingOff)
    machine.endBackoff(runID: 1)
    #expect(machine.activity == .running)
    _ = machine.cancel()
    #expect(machine.beginBackoff(runID: 1, message: message).0 == false)
  }

  @Test func transientWindow() {
    typealias Instant = LoadableKitTestsInstant
    var window = TransientWindow<Instant>()
    let backoff = JobOptions.Backoff.constant(.seconds(4))
    let limit = Duration.seconds(10)
    #expect(window.record(errorAt: Instant(0), checkpointGeneration: 0, window: limit, backoff: backoff) == .retry(after: .seconds(4), attempt: 1))
    #expect(window.record(errorAt: Instant(4), checkpointGeneration: 0, window: limit, backoff: backoff) == .retry(after: .seconds(4), attempt: 2))
    #expect(window.record(errorAt: Instant(8), checkpointGeneration: 0, window: limit, backoff: backoff) == .retry(after: .seconds(2), attempt: 3), "cut to the window")
    #expect(window.record(errorAt: Instant(10), checkpointGeneration: 0, window: limit, backoff: backoff) == .giveUp)
    // A new checkpoint opens a new window.
    #expect(window.record(errorAt: Instant(30), checkpointGeneration: 1, window: limit, backoff: backoff) == .retry(after: .seconds(4), attempt: 1))
  }

  @Test(arguments: [
    ("", true), ("{", true), (#"{"a":"b"#, true), (#"{"a":"\"#, true), (#"{"a":[1,2"#, true),
    ("{}", false), ("[]", false), (#"{"a":"{"}"#, false), ("}{", false), ("x{", false), ("42", false),
  ])
  func truncationIsTellingAPrefixFromWrongJSON(text: String, endsEarly: Bool) {
    #expect(JobJSON.endsEarly(Data(text.utf8)) == endsEarly)
  }
}

/// The error the job's state itself holds: `nil` when there is none, or when its run holds it.
private func heldError(_ machine: JobStateMachine<Int, Int>) -> (any Error)? {
  if case .known(let error) = machine.failure { error } else { nil }
}

private func isInRun(_ failure: JobStateMachine<Int, Int>.JobFailure) -> Bool {
  if case .inRun = failure { true } else { false }
}

/// A minimal instant in whole seconds, to test the window without a clock.
struct LoadableKitTestsInstant: InstantProtocol {
  var offset: Duration
  init(_ seconds: Int) { offset = .seconds(seconds) }
  init(offset: Duration) { self.offset = offset }
  func advanced(by duration: Duration) -> Self { Self(offset: offset + duration) }
  func duration(to other: Self) -> Duration { other.offset - offset }
  static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
}
