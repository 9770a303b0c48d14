import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

@Suite("Jobs: bounded messages and events, and the order of effects", .timeLimit(.minutes(2)))
struct JobsBoundsTests {
  /// Work that fails with a transient error on every run; at run `holdAt` it reports arrival and
  /// waits on a clock that nobody advances, so the test can look at the job.
  static func retryingForever(holdAt run: Int, arrived: JobLatch, clock: TestClock) -> ScriptedWork {
    let work = ScriptedWork(runs: [[.hook, .fail(transient: true)]])
    JobHooks.set(work.id) { _ in
      if JobLedger[work.id].runs == run {
        arrived.open()
        try await clock.sleep(for: .seconds(3600))
      }
    }
    return work
  }

  @Test func aZeroBackoffRetryLoopKeepsMessagesAtTheCap() async throws {
    let clock = TestClock()
    let arrived = JobLatch()
    let work = Self.retryingForever(holdAt: 2_501, arrived: arrived, clock: clock)
    let options = JobOptions(isTransient: { _ in true }, backoff: .constant(.zero), clock: clock)
    let job = Job(work, options: options)
    job.start()
    await arrived.wait()
    // 2,500 retries, one warning each; the default cap keeps the newest 1,000.
    let messages = job.messages
    #expect(messages.count == 1_000)
    #expect(job.droppedMessageCount == 1_500)
    #expect(messages.last?.text.hasPrefix("Retry 2500 ") == true)
    #expect(messages.first?.text.hasPrefix("Retry 1501 ") == true)
    #expect(job.snapshot.droppedMessageCount == 1_500)

    // The JSON form keeps the cap and the count.
    let data = try job.toJSON()
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    #expect(object["messageLimit"] as? Int == 1_000)
    #expect(object["droppedMessageCount"] as? Int == 1_500)
    #expect((object["messages"] as? [Any])?.count == 1_000)
    let restored = try Job<ScriptedWork>.fromJSON(data)
    #expect(restored.messages.count == 1_000)
    #expect(restored.messages.first?.text == messages.first?.text)
    #expect(restored.messages.last?.text == messages.last?.text)
    #expect(restored.droppedMessageCount == 1_500)
    #expect(restored.messageLimit == 1_000)
    await job.cancel()
  }

  @Test func theCapIsSetInTheOptionsAndKeptInTheJSON() async throws {
    let work = ScriptedWork(runs: [(0..<10).map { .post("m\($0)", .info) }])
    let job = Job(work, options: JobOptions(messageLimit: 3))
    job.start()
    _ = try await job.output
    #expect(job.messages.map(\.text) == ["m7", "m8", "m9"])
    #expect(job.droppedMessageCount == 7)
    let restored = try Job<ScriptedWork>.fromJSON(job.toJSON())
    #expect(restored.messageLimit == 3)
    #expect(restored.messages.map(\.text) == ["m7", "m8", "m9"])
    #expect(restored.droppedMessageCount == 7)
  }

  @Test func jsonWithoutACapOrCountStillDecodes() throws {
    let json = """
      {"fractionCompleted":0.5,"kind":"test.scripted","messages":[{"severity":"info","text":"a","timestamp":"2025-11-22T10:41:53.438Z"}],\
      "parameters":{"id":"x","output":"done","runs":[]},"schemaVersion":1,"status":"paused"}
      """
    let job = try Job<ScriptedWork>.fromJSON(Data(json.utf8))
    #expect(job.messages.map(\.text) == ["a"])
    #expect(job.droppedMessageCount == 0)
    #expect(job.messageLimit == JobOptions().messageLimit)
  }

  @Test func jsonWithMoreMessagesThanItsCapKeepsTheNewest() throws {
    let messages = (0..<5).map { #"{"severity":"info","text":"m\#($0)","timestamp":"2025-11-22T10:41:53.438Z"}"# }
    let json = """
      {"droppedMessageCount":4,"fractionCompleted":0,"kind":"test.scripted","messageLimit":2,"messages":[\(messages.joined(separator: ","))],\
      "parameters":{"id":"x","output":"done","runs":[]},"schemaVersion":1,"status":"paused"}
      """
    let job = try Job<ScriptedWork>.fromJSON(Data(json.utf8))
    #expect(job.messages.map(\.text) == ["m3", "m4"])
    #expect(job.droppedMessageCount == 7)
  }

  @Test func eventStreamsAreBoundedByDefault() async throws {
    let work = ScriptedWork(runs: [(0..<3_000).map { .post("m\($0)", .info) }])
    let job = Job(work, options: JobOptions(messageLimit: 10))
    let events = job.events  // not read until the job has finished
    job.start()
    _ = try await job.output
    let received = await events.collect()
    #expect(received.count == Job<ScriptedWork>.defaultEventBufferLimit)
    // The newest are kept: the terminal status is last.
    if case .status(.succeeded) = received.last {} else { Issue.record("the last event is \(String(describing: received.last))") }

    let all = job.events(bufferingPolicy: .unbounded)
    #expect(await all.collect().count == 1)  // a snapshot of the finished job
  }

  /// After a transition, observers hear of it before waiters resume (as for `AsyncLoadable`):
  /// a task reading `events` is resumed before a task awaiting `output`.
  @Test func observersHearOfTheEndBeforeWaitersResume() async throws {
    let executor = ManualTaskExecutor()
    let log = Mutex<[String]>([])
    let owner = JobSentinel()
    let arrived = JobLatch()
    let release = JobLatch()
    let work = ScriptedWork(runs: [[.hook]])  // no progress event just before the end
    JobHooks.set(work.id, latchJobAt(0, arrived: arrived, release: release))
    let job = Job(work)
    executor.spawn {
      for await event in job.events {
        if case .status(.succeeded) = event { log.withLock(owner: owner) { $0.append("event") } }
      }
    }
    executor.spawn {
      _ = try? await job.output
      log.withLock(owner: owner) { $0.append("output") }
    }
    executor.runInOrder()  // both wait now
    executor.spawn { job.start() }
    executor.runInOrder()
    await arrived.wait()
    executor.spawn { release.open() }
    // The work runs on the executor and ends the job there; then the woken tasks run, in order.
    executor.runInOrder()
    #expect(log.withLock(owner: owner) { $0 } == ["event", "output"])
  }
}
