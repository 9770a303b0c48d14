import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

@Suite("Jobs: persistence", .timeLimit(.minutes(1)))
struct JobsPersistenceTests {
  @Test func pauseSaveDropRestoreResumeGivesTheUninterruptedOutputAndDoesNoUnitTwice() async throws {
    let work = CountingWork(units: 10)
    let arrived = JobLatch()
    let release = JobLatch()
    JobHooks.set(work.id, latchJobAt(4, arrived: arrived, release: release))
    var job: Job<CountingWork>? = Job(work)
    job?.start()
    await arrived.wait()
    job?.pause()
    release.open()
    await job?.waitUntilParked()
    let data = try #require(try job?.toJSON())
    weak let dropped = job
    job = nil
    // The parked work keeps the job alive until it is resumed or cancelled; the app has only the
    // JSON now. Cancel the dropped instance so its task ends (as an app being terminated would).
    await dropped?.cancel()

    let restored = try Job<CountingWork>.fromJSON(data)
    #expect(restored.status == .paused)
    #expect(restored.checkpoint?.next == 5)
    #expect(restored.fractionCompleted == 0.5)
    #expect(restored.start())
    #expect(try await restored.output == work.expectedOutput)
    let ledger = JobLedger[work.id]
    #expect(ledger.finished == Array(0..<10), "every unit ran exactly once")
    #expect(ledger.started == Array(0..<10))
    #expect(ledger.runs == 2, "one run before the save, one after the restore")
    #expect(restored.status == .succeeded)
  }

  @Test func savingInTheMiddleOfAUnitRunsOnlyThatUnitAgain() async throws {
    let work = CountingWork(units: 6)
    let clock = TestClock()
    JobHooks.set(work.id, holdJobAt(3, on: clock))
    let job = Job(work)
    job.start()
    try await clock.waitForSleepers(1)  // unit 3 is in progress; the checkpoint says 3
    let data = try job.toJSON()
    await job.cancel()
    JobHooks.set(work.id) { _ in }
    let restored = try Job<CountingWork>.fromJSON(data)
    restored.start()
    #expect(try await restored.output == work.expectedOutput)
    let ledger = JobLedger[work.id]
    #expect(ledger.started == [0, 1, 2, 3, 3, 4, 5], "only the unit in progress ran again")
    #expect(ledger.finished == [0, 1, 2, 3, 4, 5])
  }

  @Test func aJobThatNeverStartedComesBackNotStarted() async throws {
    let work = CountingWork(units: 3)
    let data = try Job(work).toJSON()
    let restored = try Job<CountingWork>.fromJSON(data)
    #expect(restored.status == .notStarted)
    #expect(restored.checkpoint == nil)
    #expect(restored.work.units == 3)
    #expect(restored.start())
    #expect(try await restored.output == work.expectedOutput)
  }

  @Test func aSucceededJobComesBackSucceededWithoutItsOutput() async throws {
    let work = CountingWork(units: 3)
    let job = Job(work)
    job.start()
    _ = try await job.output
    let restored = try Job<CountingWork>.fromJSON(try job.toJSON())
    #expect(restored.status == .succeeded)
    #expect(restored.fractionCompleted == 1)
    #expect(restored.error == nil)
    #expect(restored.messages.map(\.text) == ["counted 3 units"])
    #expect(restored.start() == false)
    await #expect(throws: JobError.outputNotPersisted) { try await restored.output }
    #expect(JobLedger[work.id].runs == 1)
  }

  @Test func aFailedJobComesBackFailedWithItsErrorDescribed() async throws {
    let work = ScriptedWork(runs: [[.report(completed: 1, total: 4), .fail(transient: false)]])
    let job = Job(work)
    job.start()
    _ = try? await job.output
    let restored = try Job<ScriptedWork>.fromJSON(try job.toJSON())
    #expect(restored.status == .failed)
    let error = try #require(restored.error as? JobError)
    #expect(error == .workFailed)
    #expect(error.message == "JobTestFailure(run 1)")
    #expect(restored.fractionCompleted == 0.25)
    #expect(restored.start() == false)
    await #expect(throws: JobError.outputNotPersisted) { try await restored.output }
  }

  @Test func aCancelledJobComesBackFailedWithCancellationError() async throws {
    let job = Job(CountingWork(units: 3))
    await job.cancel()
    let restored = try Job<CountingWork>.fromJSON(try job.toJSON())
    #expect(restored.status == .failed)
    #expect(restored.error is CancellationError)
    #expect(restored.start() == false)
  }

  @Test func aJobSavedWhileCancelingComesBackCancelled() async throws {
    let (job, _, release) = await startJob(units: 3, heldAt: 1)
    let cancel = Task { await job.cancel() }
    await job.waitFor(.canceling)
    let data = try job.toJSON()
    release.open()
    _ = await cancel.value
    let restored = try Job<CountingWork>.fromJSON(data)
    #expect(restored.status == .failed)
    #expect(restored.error is CancellationError)
  }

  @Test func aConnectionLostErrorKeepsItsCode() async throws {
    let clock = TestClock()
    let work = ScriptedWork(runs: [[.fail(transient: true)]])
    let job = Job(work, options: JobOptions(isTransient: { $0 is JobTransientError }, transientWindow: .zero, clock: clock))
    job.start()
    _ = try? await job.output
    let restored = try Job<ScriptedWork>.fromJSON(try job.toJSON())
    #expect(restored.error as? JobError == .connectionLost)
  }

  @Test func theJSONFormIsDocumentedSchemaVersion1() async throws {
    let work = CountingWork(id: "fixed", units: 4)
    let job = Job(work)
    let release = await start(job, hookID: work.id, heldAt: 2)
    job.pause()
    release.open()
    await job.waitUntilParked()
    let data = try job.toJSON()
    await job.cancel()

    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    #expect(
      Set(object.keys) == [
        "schemaVersion", "kind", "parameters", "status", "checkpoint", "fractionCompleted", "messages", "messageLimit",
        "droppedMessageCount",
      ])
    #expect(object["messageLimit"] as? Int == 1_000)
    #expect(object["droppedMessageCount"] as? Int == 0)
    #expect(object["schemaVersion"] as? Int == 1)
    #expect(object["kind"] as? String == "test.counting")
    #expect(object["status"] as? String == "paused")
    #expect(object["fractionCompleted"] as? Double == 0.75)
    let parameters = try #require(object["parameters"] as? [String: Any])
    #expect(parameters["id"] as? String == "fixed")
    #expect(parameters["units"] as? Int == 4)
    let checkpoint = try #require(object["checkpoint"] as? [String: Any])
    #expect(checkpoint["next"] as? Int == 3)
    #expect(checkpoint["sum"] as? Int == 5)
    #expect((object["messages"] as? [Any])?.isEmpty == true)
    // Keys are sorted, so equal jobs give equal bytes.
    let text = try #require(String(data: data, encoding: .utf8))
    #expect(text.hasPrefix(#"{"checkpoint":{"next":3,"sum":5},"droppedMessageCount":0,"fractionCompleted":0.75,"kind":"test.counting","messageLimit":1000"#))
  }

  @Test func messagesSurviveTheRoundTripWithISO8601Timestamps() async throws {
    let work = ScriptedWork(runs: [[.post("first", .info), .post("second", .warning), .post("third", .error)]])
    let job = Job(work)
    job.start()
    _ = try await job.output
    let data = try job.toJSON()
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    let messages = try #require(object["messages"] as? [[String: Any]])
    #expect(messages.map { $0["severity"] as? String } == ["info", "warning", "error"])
    let timestamp = try #require(messages.first?["timestamp"] as? String)
    let parsed = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(timestamp)
    #expect(abs(parsed.timeIntervalSince(job.messages[0].timestamp)) < 0.001)

    let restored = try Job<ScriptedWork>.fromJSON(data)
    #expect(restored.messages.map(\.text) == ["first", "second", "third"])
    #expect(restored.messages.map(\.severity) == [.info, .warning, .error])
    for (before, after) in zip(job.messages, restored.messages) {
      #expect(abs(before.timestamp.timeIntervalSince(after.timestamp)) < 0.001)
      #expect(before.source == after.source)
    }
  }

  @Test func timestampsWithoutFractionalSecondsAreRead() throws {
    let json = #"""
      {"schemaVersion":1,"kind":"test.counting","parameters":{"id":"x","units":2},"status":"paused",
       "fractionCompleted":0,"messages":[{"text":"hi","severity":"info","timestamp":"2024-05-01T12:00:00Z"}]}
      """#
    let job = try Job<CountingWork>.fromJSON(Data(json.utf8))
    #expect(job.messages.first?.timestamp == Date(timeIntervalSince1970: 1_714_564_800))
    #expect(job.status == .paused)
  }

  @Test func aRestoredJobKeepsItsOptions() async throws {
    let clock = TestClock()
    let work = ScriptedWork(runs: [[.fail(transient: true)], []])
    let data = try Job(work).toJSON()
    let options = JobOptions(isTransient: { $0 is JobTransientError }, backoff: .constant(.seconds(5)), clock: clock)
    let job = try Job<ScriptedWork>.fromJSON(data, options: options)
    job.start()
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [.init(offset: .seconds(5))])
    await clock.advance(by: .seconds(5))
    #expect(try await job.output == "done")
  }

  @Test func anUnencodableWorkThrowsEncodingFailed() {
    let job = Job(UnencodableWork())
    #expect(throws: JobError.encodingFailed) { try job.toJSON() }
  }

  // MARK: - Bad input

  struct Corruption: Sendable, CustomTestStringConvertible {
    var name: String
    var data: Data
    var code: JobError.Code
    var testDescription: String { "\(name) → \(code)" }

    init(_ name: String, _ text: String, _ code: JobError.Code) {
      self.init(name, Data(text.utf8), code)
    }
    init(_ name: String, _ data: Data, _ code: JobError.Code) {
      self.name = name
      self.data = data
      self.code = code
    }
  }

  static let valid = #"{"checkpoint":{"next":1,"sum":0},"fractionCompleted":0.5,"kind":"test.counting","messages":[{"severity":"info","text":"m","timestamp":"2024-05-01T12:00:00.000Z"}],"parameters":{"id":"x","units":2},"schemaVersion":1,"status":"paused"}"#

  static func replacing(_ old: String, with new: String) -> String {
    valid.replacingOccurrences(of: old, with: new)
  }

  static let corruptions: [Corruption] = [
    Corruption("empty", "", .truncated),
    Corruption("whitespace", "  \n", .truncated),
    Corruption("cut after the first key", #"{"checkpoint":"#, .truncated),
    Corruption("cut in half", String(valid.prefix(valid.count / 2)), .truncated),
    Corruption("cut inside a string", String(valid.prefix(valid.count - 12)), .truncated),
    Corruption("cut before the last brace", String(valid.dropLast()), .truncated),
    Corruption("deeply nested and unfinished", String(repeating: "[", count: 100_000), .truncated),
    Corruption("not JSON", "hello, job", .malformed),
    Corruption("binary", Data([0xFF, 0xFE, 0x00, 0x01, 0x7B]), .malformed),
    Corruption("an array", "[1, 2, 3]", .malformed),
    Corruption("a number", "42", .malformed),
    Corruption("null", "null", .malformed),
    Corruption("an empty object", "{}", .malformed),
    Corruption("extra closing brace", valid + "}", .malformed),
    Corruption("deeply nested", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000), .malformed),
    Corruption("schema version as a string", replacing(#""schemaVersion":1"#, with: #""schemaVersion":"1""#), .malformed),
    Corruption("schema version 0", replacing(#""schemaVersion":1"#, with: #""schemaVersion":0"#), .malformed),
    Corruption("no kind", replacing(#""kind":"test.counting","#, with: ""), .malformed),
    Corruption("no parameters", replacing(#","parameters":{"id":"x","units":2}"#, with: ""), .malformed),
    Corruption("parameters of the wrong type", replacing(#""units":2"#, with: #""units":"two""#), .malformed),
    Corruption("checkpoint of the wrong type", replacing(#"{"next":1,"sum":0}"#, with: "[1]"), .malformed),
    Corruption("unknown status", replacing(#""status":"paused""#, with: #""status":"exploded""#), .malformed),
    Corruption("progress above 1", replacing(#""fractionCompleted":0.5"#, with: #""fractionCompleted":2.5"#), .malformed),
    Corruption("negative progress", replacing(#""fractionCompleted":0.5"#, with: #""fractionCompleted":-1"#), .malformed),
    Corruption("negative message limit", replacing(#""kind":"test.counting","#, with: #""kind":"test.counting","messageLimit":-1,"#), .malformed),
    Corruption("negative dropped message count", replacing(#""kind":"test.counting","#, with: #""kind":"test.counting","droppedMessageCount":-1,"#), .malformed),
    Corruption("unknown severity", replacing(#""severity":"info""#, with: #""severity":"fatal""#), .malformed),
    Corruption("bad timestamp", replacing("2024-05-01T12:00:00.000Z", with: "yesterday"), .malformed),
    Corruption("messages not an array", replacing(#""messages":[{"severity":"info","text":"m","timestamp":"2024-05-01T12:00:00.000Z"}]"#, with: #""messages":{}"#), .malformed),
    Corruption("foreign kind", replacing(#""kind":"test.counting""#, with: #""kind":"test.scripted""#), .kindMismatch),
    Corruption("newer schema", replacing(#""schemaVersion":1"#, with: #""schemaVersion":2"#), .unsupportedSchemaVersion),
    Corruption("newer schema, other fields unknown", #"{"schemaVersion":99,"payload":"?"}"#, .unsupportedSchemaVersion),
  ]

  @Test func theValidFixtureIsValid() throws {
    let job = try Job<CountingWork>.fromJSON(Data(Self.valid.utf8))
    #expect(job.status == .paused)
    #expect(job.checkpoint == CountingWork.Progress(next: 1, sum: 0))
    #expect(job.fractionCompleted == 0.5)
  }

  @Test(arguments: corruptions)
  func corruptedJSONIsRejectedWithItsCode(_ corruption: Corruption) throws {
    do {
      _ = try Job<CountingWork>.fromJSON(corruption.data)
      Issue.record("\(corruption.name) was accepted")
    } catch let error as JobError {
      #expect(error.code == corruption.code, "\(corruption.name): \(error)")
      #expect(!error.message.isEmpty)
      #expect(error.description.hasPrefix("JobError.\(corruption.code):"))
    }
  }

  @Test func malformedErrorsSayWhere() throws {
    let data = Data(Self.replacing(#""units":2"#, with: #""units":"two""#).utf8)
    let error = try #require(throws: JobError.self) { try Job<CountingWork>.fromJSON(data) }
    #expect(error.message.contains("parameters.units"), "\(error.message)")
  }
}

@Suite("Jobs: registry", .timeLimit(.minutes(1)))
struct JobsRegistryTests {
  @Test func restoresJobsByKind() async throws {
    let registry = JobRegistry(CountingWork.self, ScriptedWork.self)
    #expect(registry.kinds == ["test.counting", "test.scripted"])
    let counting = CountingWork(units: 3)
    let scripted = ScriptedWork(runs: [[.post("hi", .info)]])
    let first = try registry.job(fromJSON: try Job(counting).toJSON())
    let second = try registry.job(fromJSON: try Job(scripted).toJSON())
    #expect(first.kind == "test.counting")
    #expect(second.kind == "test.scripted")
    #expect(first.status == .notStarted)
    #expect(first.start())
    #expect(try await #require(first as? Job<CountingWork>).output == counting.expectedOutput)
    #expect(second.start())
    #expect(try await #require(second as? Job<ScriptedWork>).output == "done")
    #expect(second.messages.map(\.text) == ["hi"])
  }

  @Test func registeredOptionsAreUsed() async throws {
    let clock = TestClock()
    var registry = JobRegistry()
    registry.register(
      ScriptedWork.self,
      options: JobOptions(isTransient: { _ in true }, backoff: .constant(.seconds(7)), clock: clock))
    let work = ScriptedWork(runs: [[.fail(transient: true)], []])
    let job = try registry.job(fromJSON: try Job(work).toJSON())
    job.start()
    try await clock.waitForSleepers(1)
    #expect(clock.pendingDeadlines == [.init(offset: .seconds(7))])
    await clock.advance(by: .seconds(7))
    #expect(try await #require(job as? Job<ScriptedWork>).output == "done")
  }

  @Test func registeringATypeTwiceIsFine() {
    var registry = JobRegistry(CountingWork.self)
    registry.register(CountingWork.self)
    #expect(registry.kinds == ["test.counting"])
  }

  @Test(arguments: [
    JobsPersistenceTests.Corruption("unknown kind", JobsPersistenceTests.replacing(#""kind":"test.counting""#, with: #""kind":"test.elsewhere""#), .unknownKind),
    JobsPersistenceTests.Corruption("truncated", String(JobsPersistenceTests.valid.prefix(40)), .truncated),
    JobsPersistenceTests.Corruption("malformed", "{]", .malformed),
    JobsPersistenceTests.Corruption("newer schema", JobsPersistenceTests.replacing(#""schemaVersion":1"#, with: #""schemaVersion":3"#), .unsupportedSchemaVersion),
    JobsPersistenceTests.Corruption("bad parameters", JobsPersistenceTests.replacing(#""units":2"#, with: #""units":null"#), .malformed),
  ])
  func rejectsBadJSONWithItsCode(_ corruption: JobsPersistenceTests.Corruption) {
    let registry = JobRegistry(CountingWork.self)
    #expect(throws: JobError(code: corruption.code, message: "")) { try registry.job(fromJSON: corruption.data) }
  }

  @Test func readsTheKindWithoutRestoring() throws {
    #expect(try JobRegistry.kind(ofJSON: Data(JobsPersistenceTests.valid.utf8)) == "test.counting")
    #expect(throws: JobError.truncated) { try JobRegistry.kind(ofJSON: Data()) }
  }

  @Test func twoTypesWithOneKindIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      struct Impostor: JobWork {
        static let kind = "test.counting"
        func run(in context: JobContext<Int>) async throws -> Int { 0 }
      }
      var registry = JobRegistry(CountingWork.self)
      registry.register(Impostor.self)
    }
  }
}
