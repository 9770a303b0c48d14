import Foundation
import Observation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: progress and messages", .timeLimit(.minutes(1)))
struct JobsProgressTests {
  /// The progress events of a job's whole life, from a subscription made before it started.
  func progressEvents(of job: Job<some JobWork>) async -> (Task<[Double], Never>) {
    let events = job.events
    return Task {
      var values: [Double] = []
      for await event in events {
        if case .progress(let fraction) = event { values.append(fraction) }
      }
      return values
    }
  }

  @Test func progressIsMonotonicAndReachesOneOnSuccess() async throws {
    let work = CountingWork(units: 40)
    let job = Job(work)
    let progress = await progressEvents(of: job)
    job.start()
    _ = try await job.output
    let values = await progress.value
    #expect(values.count == 40)
    #expect(values == (1...40).map { Double($0) / 40 })
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "strictly increasing")
    #expect(values.last == 1)
    #expect(job.fractionCompleted == 1)
  }

  @Test func progressIsClampedAndNeverGoesDown() async throws {
    let steps: [(ScriptedWork.Action, expected: Double)] = [
      (.report(completed: 5, total: 10), 0.5),
      (.report(completed: 3, total: 10), 0.5),  // lower: ignored
      (.report(completed: 7, total: 0), 0.5),  // total 0: ignored
      (.report(completed: 7, total: -4), 0.5),  // negative total: ignored
      (.report(completed: -3, total: 10), 0.5),  // negative: clamped to 0, lower
      (.reportFraction(.nan), 0.5),  // NaN: ignored
      (.reportFraction(0.625), 0.625),
      (.report(completed: 20, total: 10), 1),  // above: clamped to 1
      (.reportFraction(.infinity), 1),
    ]
    var actions: [ScriptedWork.Action] = []
    for (action, _) in steps { actions += [action, .hook] }
    let work = ScriptedWork(runs: [actions])
    let reached = AsyncStream.makeStream(of: Int.self)
    let proceed = JobLatchChain(count: steps.count)
    JobHooks.set(work.id) { index in
      reached.continuation.yield(index / 2)
      await proceed.wait(index / 2)
    }
    let job = Job(work)
    job.start()
    var iterator = reached.stream.makeAsyncIterator()
    for (index, step) in steps.enumerated() {
      #expect(await iterator.next() == index)
      #expect(job.fractionCompleted == step.expected, "after step \(index): \(step.0)")
      proceed.open(index)
    }
    _ = try await job.output
    #expect(job.fractionCompleted == 1)
  }

  @Test func aNegativeFirstReportStaysAtZero() async throws {
    let work = ScriptedWork(runs: [[.report(completed: -1, total: 3), .fail(transient: false)]])
    let job = Job(work)
    job.start()
    _ = try? await job.output
    #expect(job.fractionCompleted == 0)
    #expect(job.fractionCompleted.sign == .plus)
  }

  @Test func progressReportedPerItemIsCoalesced() async throws {
    let total = 200_000
    struct PerItem: JobWork {
      static let kind = "test.per-item"
      var total: Int
      func run(in context: JobContext<Int>) async throws -> Int {
        for item in 1...total {
          try await context.pausePoint()
          context.reportProgress(completed: item, total: total)
        }
        return total
      }
    }
    let job = Job(PerItem(total: total))
    let progress = await progressEvents(of: job)
    job.start()
    #expect(try await job.output == total)
    let values = await progress.value
    #expect(values.count <= 1001, "one event per 1/1000 step, not \(values.count)")
    #expect(values.count >= 1000)
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
    #expect(values.last == 1)
  }

  /// Progress nobody listens to stays in the job's atomic (no lock, no event); a subscriber that
  /// comes later finds it in its snapshot and then hears every step.
  @Test func anObserverAddedMidRunSeesTheProgressSoFarThenEveryStep() async throws {
    let work = ScriptedWork(runs: [[.report(completed: 1, total: 2), .hook, .report(completed: 3, total: 4)]])
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 1)
    let events = job.events
    release.open()
    _ = try await job.output
    var snapshotProgress: Double?
    var steps: [Double] = []
    for await event in events {
      switch event {
      case .snapshot(let snapshot): snapshotProgress = snapshot.fractionCompleted
      case .progress(let fraction): steps.append(fraction)
      case .status, .message: break
      }
    }
    #expect(snapshotProgress == 0.5)
    #expect(steps == [0.75, 1])
  }

  /// The first subscriber of a job nobody watched gets the progress so far in its snapshot only:
  /// the next status change does not repeat it as a progress event.
  @Test func aLateFirstSubscriberIsNotToldTheProgressTwice() async throws {
    let (job, release) = await startJobHalfDoneWithNobodyListening()
    let events = job.events
    let seen = await pauseAndCancel(job, releasing: release, reading: events)
    #expect(seen == ["snapshot 0.5", "paused", "canceling", "failed"])
  }

  /// Reading ``Job/fractionCompleted`` in `withObservationTracking` makes the job publish its
  /// progress steps from then on: the tracker hears of the next step while the work still runs.
  @Test func observationTrackingStartedMidRunHearsTheNextStep() async throws {
    let work = ScriptedWork(runs: [[.report(completed: 1, total: 2), .hook, .report(completed: 3, total: 4), .hook]])
    let arrived = [JobLatch(), JobLatch()]
    let release = [JobLatch(), JobLatch()]
    JobHooks.set(work.id) { unit in
      let index = unit == 1 ? 0 : 1
      arrived[index].open()
      await release[index].wait()
    }
    let job = Job(work)
    job.start()
    await arrived[0].wait()
    let changed = JobLatch()
    let read = withObservationTracking { job.fractionCompleted } onChange: { changed.open() }
    #expect(read == 0.5)
    release[0].open()
    await arrived[1].wait()  // the work reported 3/4 and waits at its second hook
    #expect(changed.isOpen, "the tracker heard of the step to 0.75 before the job ended")
    release[1].open()
    _ = try await job.output
  }

  @Test func progressIsFlushedBeforeAStatusChange() async throws {
    // 1/3000 is below one event step; pausing must still publish it.
    let work = ScriptedWork(runs: [[.report(completed: 1, total: 3000), .hook, .pausePoint]])
    let arrived = JobLatch()
    let release = JobLatch()
    JobHooks.set(work.id, latchJobAt(1, arrived: arrived, release: release))
    let job = Job(work)
    let events = job.events
    job.start()
    await arrived.wait()
    job.pause()
    release.open()
    await job.waitUntilParked()
    await job.cancel()
    var sawProgressBeforePause = false
    for await event in events {
      if case .progress(let fraction) = event { sawProgressBeforePause = fraction == 1.0 / 3000 }
      if case .status(.paused) = event { break }
    }
    #expect(sawProgressBeforePause)
  }

  @Test func messagesKeepTheirOrder() async throws {
    let texts = (0..<200).map { "message \($0)" }
    let work = ScriptedWork(runs: [texts.map { .post($0, .info) } + [.post("careful", .warning)]])
    let job = Job(work)
    let events = job.events
    job.start()
    _ = try await job.output
    #expect(job.messages.map(\.text) == texts + ["careful"])
    #expect(job.messages.last?.severity == .warning)
    #expect(job.messages.allSatisfy { $0.source == nil })
    #expect(zip(job.messages, job.messages.dropFirst()).allSatisfy { $0.timestamp <= $1.timestamp })
    var posted: [String] = []
    for await event in events {
      if case .message(let message) = event { posted.append(message.text) }
    }
    #expect(posted == texts + ["careful"])
  }

  @Test func messagesFromConcurrentChildTasksAreAllKept() async throws {
    struct FanOut: JobWork {
      static let kind = "test.fan-out"
      func run(in context: JobContext<Int>) async throws -> Int {
        await withTaskGroup(of: Void.self) { group in
          for child in 0..<8 {
            group.addTask {
              for index in 0..<50 { context.post("\(child)-\(index)", severity: .info, source: "child \(child)") }
            }
          }
        }
        return 0
      }
    }
    let job = Job(FanOut())
    job.start()
    _ = try await job.output
    #expect(job.messages.count == 400)
    for child in 0..<8 {
      let mine = job.messages.filter { $0.source == "child \(child)" }.map(\.text)
      #expect(mine == (0..<50).map { "\(child)-\($0)" }, "each child's messages keep their order")
    }
  }
}

/// Latches opened one by one, by index.
final class JobLatchChain: Sendable {
  private let latches: [JobLatch]
  init(count: Int) { latches = (0..<count).map { _ in JobLatch() } }
  func wait(_ index: Int) async { await latches[index].wait() }
  func open(_ index: Int) { latches[index].open() }
}
