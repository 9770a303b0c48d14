import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Work that yields a seeded number of times in each unit and carries its running sum in the
/// checkpoint, so a resumed run gives the right output only if it resumed from the checkpoint.
struct YieldingWork: JobWork {
  static let kind = "test.yielding"
  var units: Int
  var yields: Int

  func run(in context: JobContext<CountingWork.Progress>) async throws -> Int {
    var progress = context.checkpoint ?? CountingWork.Progress(next: 0, sum: 0)
    while progress.next < units {
      try await context.pausePoint()
      for _ in 0..<yields { await Task.yield() }
      let unit = progress.next
      progress = CountingWork.Progress(next: unit + 1, sum: progress.sum + unit * unit)
      context.saveCheckpoint(progress)
      context.reportProgress(completed: progress.next, total: units)
      context.post("unit \(unit)")
    }
    return progress.sum
  }

  var expectedOutput: Int { (0..<units).reduce(0) { $0 + $1 * $1 } }
}

@Suite("Jobs: schedule exploration", .timeLimit(.minutes(5)))
struct JobsScheduleExplorationTests {
  /// Start, pause, resume, cancel, wait until parked, await the output (staying, or leaving when the
  /// awaiting task is cancelled) and persist (toJSON, then fromJSON and run the restored job to
  /// its end), in a seeded order on one executor; a cancel is always among them, so every schedule
  /// ends. Every call returns exactly once, the final state is consistent, every restored copy
  /// matches the state it was saved in, an output caller's answer agrees with how the job ended,
  /// and the run's attempt keeps no waiter slot.
  @Test func pauseResumeCancelCheckpointAndPersist() {
    explore { executor, generator in
      let work = YieldingWork(units: 3, yields: Int.random(in: 0...2, using: &generator))
      let job = Job(work, options: JobOptions(messageLimit: 2))
      let operations = (0..<Int.random(in: 3...6, using: &generator)).map { _ in Int.random(in: 0...8, using: &generator) } + [7]
      let calls = Calls(expected: operations.count)
      let problems = Recorder<String>()
      for (call, operation) in operations.enumerated() {
        executor.spawn {
          switch operation {
          case 0, 1:
            _ = job.start()
            calls.record(call, "ok")
          case 2:
            _ = job.pause()
            calls.record(call, "ok")
          case 3:
            await job.waitUntilParked()
            calls.record(call, "ok")
          case 4:
            await calls.record(call) {
              let output = try await job.output
              if output != work.expectedOutput { problems.append("output \(output)") }
              if job.status != .succeeded { problems.append("output returned while \(job.status)") }
            }
          case 8:
            // An output caller that leaves: its task is cancelled after a seeded number of steps.
            let leaver = Task(executorPreference: executor) {
              do {
                let output = try await job.output
                if output != work.expectedOutput { problems.append("leaver's output \(output)") }
              } catch is CancellationError {
              } catch {
                problems.append("leaver threw \(error)")
              }
            }
            for _ in 0..<(call % 3) { await Task.yield() }
            leaver.cancel()
            await leaver.value
            calls.record(call, "ok")
          case 5, 6:
            await calls.record(call) {
              let before = job.checkpoint?.next ?? 0
              let saved = job.status
              let data = try job.toJSON()
              let restored = try Job<YieldingWork>.fromJSON(data)
              let expected: JobStatus =
                switch saved {
                case .notStarted: .notStarted
                case .started, .paused: .paused
                case .canceling, .failed: .failed
                case .succeeded: .succeeded
                }
              // Nothing else runs between the reads above and here (one thread, no suspension).
              let status = restored.status
              if status != expected { problems.append("saved \(saved), restored \(status)") }
              if (restored.checkpoint?.next ?? 0) != before { problems.append("restored checkpoint \(String(describing: restored.checkpoint)), saved \(before)") }
              if restored.messages.count > 2 { problems.append("restored messages over the cap") }
              if !status.isFinished {
                restored.start()
                let output = try await restored.output
                if output != work.expectedOutput { problems.append("restored output \(output)") }
              }
            }
          default:
            _ = await job.cancel()
            calls.record(call, "ok")
          }
        }
      }
      return {
        var violations = calls.violations + problems.values
        let snapshot = job.snapshot
        if !snapshot.status.isFinished { violations.append("ended \(snapshot.status)") }
        if (snapshot.error != nil) != (snapshot.status == .failed) { violations.append("error and status disagree") }
        if snapshot.status == .failed, !(snapshot.error is CancellationError) { violations.append("failed with \(snapshot.error!)") }
        if snapshot.status == .succeeded, snapshot.fractionCompleted != 1 { violations.append("succeeded below 1") }
        if snapshot.messages.count > 2 { violations.append("messages over the cap") }
        if job.waiterCountForTesting != 0 { violations.append("waiters left") }
        if job.storedOutputWaiterSlotsForTesting != 0 { violations.append("output waiter slots left") }
        return violations
      }
    }
  }
}
