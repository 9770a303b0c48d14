import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: stress", .timeLimit(.minutes(2)))
struct JobsStressTests {
  static let legal: [JobStatus: Set<JobStatus>] = [
    .notStarted: [.started, .failed],
    .started: [.paused, .canceling, .succeeded, .failed],
    .paused: [.started, .canceling, .succeeded, .failed],
    .canceling: [.failed],
    .succeeded: [],
    .failed: [],
  ]

  @Test func manyTasksCallingStartPauseCancelAndOutputKeepTheInvariants() async throws {
    try await bounded { try await Self.manyTasksCallingStartPauseCancelAndOutput() }
  }

  /// The body of the test above, in a task the test's time limit can abandon (a lost waiter).
  static func manyTasksCallingStartPauseCancelAndOutput() async throws {
    for round in 0..<100 {
      let work = CountingWork(units: 150)
      let job = Job(work)
      let statuses = job.statusUpdates
      let statusRecorder = Task { await statuses.collect() }
      let outputs = (0..<6).map { _ in Task { try await job.output } }
      let cancels = Recorder<Bool>()
      let restoredStatuses = Recorder<JobStatus>()
      await withTaskGroup(of: Void.self) { group in
        for index in 0..<60 {
          group.addTask {
            switch (index + round) % 8 {
            case 0, 1, 2: job.start()
            case 3, 4: job.pause()
            case 5:
              await job.waitUntilParked()
              job.start()
            case 6:
              if let data = try? job.toJSON(), let restored = try? Job<CountingWork>.fromJSON(data) {
                restoredStatuses.append(restored.status)
              }
            default:
              if index % 16 == 7 { cancels.append(await job.cancel()) } else { _ = job.snapshot }
            }
          }
        }
      }
      // Whatever happened, end the job: resume it if paused, then cancel.
      job.start()
      cancels.append(await job.cancel())

      let status = job.status
      #expect(status.isFinished, "round \(round): \(status)")
      #expect(cancels.values.filter { $0 }.count <= 1, "round \(round): at most one cancel cancels")
      let ledger = JobLedger[work.id]
      #expect(ledger.finished == Array(0..<ledger.finished.count), "round \(round): no unit ran twice or out of order")
      #expect(ledger.runs <= 1, "a job runs its work once (or never, when cancelled first)")
      for output in outputs {
        let result = await output.result
        switch status {
        case .succeeded:
          #expect(try result.get() == work.expectedOutput)
        default:
          #expect(throws: CancellationError.self) { try result.get() }
        }
      }
      if status == .succeeded {
        #expect(job.fractionCompleted == 1)
        #expect(job.error == nil)
        #expect(ledger.finished.count == 150)
        #expect(cancels.values.allSatisfy { !$0 })
      } else {
        #expect(job.error is CancellationError)
        #expect(cancels.values.filter { $0 }.count == 1)
      }
      let sequence = await statusRecorder.value
      #expect(sequence.first == .notStarted)
      #expect(sequence.last == status)
      for (from, to) in zip(sequence, sequence.dropFirst()) {
        #expect(legal[from]?.contains(to) == true, "round \(round): \(from) → \(to)")
      }
      #expect(
        restoredStatuses.values.allSatisfy { [.notStarted, .paused, .succeeded, .failed].contains($0) },
        "a restored job is never running or canceling")
    }
  }

  @Test func childTasksParkingTogetherAllResumeAndAllStop() async throws {
    try await bounded { try await Self.parkTogether() }
  }

  /// Fifty rounds of jobs whose child tasks park together: half resumed to the end, half cancelled.
  static func parkTogether() async throws {
    for round in 0..<50 {
      let job = Job(FanOutPausing())
      job.start()
      await withTaskGroup(of: Void.self) { group in
        for index in 0..<40 {
          group.addTask {
            if index % 2 == 0 {
              job.pause()
              await job.waitUntilParked()
            } else {
              job.start()
            }
          }
        }
      }
      if round % 2 == 0 {
        job.start()
        #expect(try await job.output == 1200)
        #expect(job.status == .succeeded)
      } else {
        await job.cancel()
        #expect(job.status.isFinished)
        if job.status == .failed { #expect(job.error is CancellationError) }
      }
    }
  }
}

/// Work whose four child tasks each pass 300 pause points.
struct FanOutPausing: JobWork {
  static let kind = "test.fan-out-pausing"
  var id = UUID().uuidString
  func run(in context: JobContext<Int>) async throws -> Int {
    try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<4 {
        group.addTask {
          for step in 1...300 {
            try await context.pausePoint()
            context.reportProgress(completed: step, total: 300)
          }
          return 300
        }
      }
      return try await group.reduce(0, +)
    }
  }
}
