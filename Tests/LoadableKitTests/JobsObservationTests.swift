import Foundation
import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

@Suite("Jobs: observation", .timeLimit(.minutes(1)))
struct JobsObservationTests {
  @Test func aLateSubscriberGetsTheSnapshotFirst() async throws {
    let work = ScriptedWork(runs: [[.report(completed: 1, total: 4), .post("halfway", .info), .hook, .pausePoint]])
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 2)
    job.pause()
    release.open()
    await job.waitUntilParked()

    var iterator = job.events.makeAsyncIterator()
    guard case .snapshot(let snapshot) = await iterator.next() else {
      Issue.record("the first event is not a snapshot")
      return
    }
    #expect(snapshot.status == .paused)
    #expect(snapshot.fractionCompleted == 0.25)
    #expect(snapshot.messages.map(\.text) == ["halfway"])
    #expect(snapshot.error == nil)

    job.start()
    var later: [String] = []
    while let event = await iterator.next() {
      switch event {
      case .snapshot: later.append("snapshot")
      case .status(let status): later.append("status \(status)")
      case .progress(let fraction): later.append("progress \(fraction)")
      case .message(let message): later.append("message \(message.text)")
      }
    }
    #expect(later == ["status started", "progress 1.0", "status succeeded"], "then every change, and the end")
  }

  @Test func subscribingToAFinishedJobGivesTheSnapshotAndEnds() async throws {
    let job = Job(CountingWork(units: 2))
    job.start()
    _ = try await job.output
    let events = await job.events.collect()
    #expect(events.count == 1)
    guard case .snapshot(let snapshot) = events.first else {
      Issue.record("expected a snapshot")
      return
    }
    #expect(snapshot.status == .succeeded)
    #expect(snapshot.fractionCompleted == 1)
  }

  @Test func theStreamEndsWhenTheJobIsDeallocated() async {
    var job: Job<CountingWork>? = Job(CountingWork(units: 2))
    let events = job!.events
    job = nil
    let received = await events.collect()
    #expect(received.count == 1, "the snapshot, then the end")
  }

  /// Every stream ends when the job is deallocated, not only the first one made.
  @Test func everyStreamEndsWhenTheJobIsDeallocated() async {
    var job: Job<CountingWork>? = Job(CountingWork(units: 2))
    let streams = (0..<3).map { _ in job!.events }
    job = nil
    let ended = Recorder<Int>()
    for (index, stream) in streams.enumerated() {
      Task {
        let received = await stream.collect()
        if received.count == 1 { ended.append(index) }  // the snapshot, then the end
      }
    }
    await eventually { ended.count == 3 }
    #expect(Set(ended.values) == [0, 1, 2])
  }

  @Test func endingTheIterationRemovesTheSubscription() async throws {
    let job = Job(CountingWork(units: 2))
    do {
      let events = job.events
      var iterator = events.makeAsyncIterator()
      _ = await iterator.next()
    }
    job.start()
    _ = try await job.output  // delivering to a dropped stream must not crash or hang
    #expect(job.status == .succeeded)
  }

  @Test func withObservationTrackingSeesStatusChanges() async throws {
    let job = Job(CountingWork(units: 2))
    let changes = Counter()
    withObservationTracking {
      _ = job.status
    } onChange: {
      changes.increment()
    }
    #expect(changes.count == 0)
    job.start()
    #expect(changes.count == 1, "start() notified the registrar before returning")
    _ = try await job.output
  }

  @Test func withObservationTrackingSeesProgressMessagesAndErrors() async throws {
    let work = ScriptedWork(runs: [[.hook, .report(completed: 1, total: 2), .post("hello", .info), .fail(transient: false)]])
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 0)
    let progress = Counter()
    let messages = Counter()
    let errors = Counter()
    withObservationTracking { _ = job.fractionCompleted } onChange: { progress.increment() }
    withObservationTracking { _ = job.messages } onChange: { messages.increment() }
    withObservationTracking { _ = job.error } onChange: { errors.increment() }
    release.open()
    _ = try? await job.output
    #expect(progress.count == 1)
    #expect(messages.count == 1)
    #expect(errors.count == 1)
  }

  @Test func startWithHandlersReportsStatusesThenTheResult() async throws {
    let work = CountingWork(units: 3)
    let job = Job(work)
    let statuses = Recorder<JobStatus>()
    let order = Recorder<String>()
    let result: Int = try await withCheckedThrowingContinuation { continuation in
      let started = job.start(statusHandler: { status in
        statuses.append(status)
        order.append("status \(status)")
      }) { result in
        order.append("completion")
        continuation.resume(with: result)
      }
      #expect(started)
    }
    #expect(result == work.expectedOutput)
    #expect(statuses.values.first == .started || statuses.values.first == .succeeded)
    #expect(statuses.values.last == .succeeded)
    #expect(order.values.suffix(2) == ["status succeeded", "completion"], "the completion comes last")
    #expect(order.values.filter { $0 == "completion" }.count == 1)
  }

  @Test func startWithHandlersOnAFinishedJobCompletesAtOnce() async throws {
    let job = Job(CountingWork(units: 1))
    job.start()
    _ = try await job.output
    let completions = Recorder<Result<Int, any Error>>()
    let started = job.start(statusHandler: nil) { completions.append($0) }
    #expect(started == false)
    #expect(completions.count == 1, "the result was known, so the completion ran before start returned")
    #expect(try completions.values.first?.get() == 0)
  }

  /// Handlers added while the job's end is told to its observers — the job has ended, and the
  /// callers of `output` are not resumed yet — get the end too, with the output.
  @Test func handlersAddedWhileTheEndIsToldGetTheResult() async throws {
    let work = CountingWork(units: 1)
    let job = Job(work)
    let lateStream = Mutex<AsyncStream<JobEvent>?>(nil)
    let late: Result<Int, any Error> = await withCheckedContinuation { continuation in
      job.start(statusHandler: nil) { _ in
        // Delivered before the callers of `output` resume: nothing has resumed them yet.
        lateStream.withLock { $0 = job.events }
        job.start(statusHandler: nil) { late in continuation.resume(returning: late) }
      }
    }
    #expect(try late.get() == work.expectedOutput)
    let events = await lateStream.withLock { $0 }!.collect()
    #expect(events.count == 1, "a snapshot, then the end")
    #expect(try await job.output == work.expectedOutput)
  }

  @Test func startWithHandlersReportsFailure() async throws {
    let work = ScriptedWork(runs: [[.fail(transient: false)]])
    let job = Job(work)
    let error: (any Error)? = await withCheckedContinuation { continuation in
      job.start(statusHandler: nil) { result in
        if case .failure(let error) = result { continuation.resume(returning: error) } else { continuation.resume(returning: nil) }
      }
    }
    #expect(error as? JobTestFailure == JobTestFailure(reason: "run 1"))
  }

  @Test func handlersMayCallBackIntoTheJob() async throws {
    let work = CountingWork(units: 3)
    // The first unit waits until the handler paused the job: otherwise the work could finish (or
    // pass its last pause point) before the handlers are registered, on a busy machine.
    let paused = JobLatch()
    JobHooks.set(work.id) { unit in if unit == 0 { await paused.wait() } }
    let job = Job(work)
    let calls = Counter()
    let done: Void = await withCheckedContinuation { continuation in
      job.start(statusHandler: { status in
        calls.increment()
        _ = job.status  // reentrant reads do not deadlock
        _ = job.snapshot
        if status == .started, calls.count == 1 {
          _ = job.pause()  // pauses from inside a handler
          paused.open()
        }
      }) { _ in continuation.resume() }
      Task {
        await job.waitFor(.paused)
        await job.waitUntilParked()
        job.start()
      }
    }
    _ = done
    #expect(job.status == .succeeded)
    #expect(calls.count >= 3)
  }
}
