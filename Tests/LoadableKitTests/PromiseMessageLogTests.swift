import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a job's message log keeps its storage bounded.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

@Suite("Promises: a job's message storage stays bounded", .timeLimit(.minutes(1)))
struct PromiseMessageLogTests {

  /// Past its cap the log drops the oldest messages from its storage too, not only from what
  /// `messages` shows.
  @Test func theMessageLogsStorageStaysBounded() {
    var log = JobMessageLog(limit: 10)
    var largest = 0
    for index in 0..<1_000 {
      log.append(JobMessage("m\(index)", timestamp: Date(timeIntervalSince1970: 0)))
      largest = max(largest, log.storageCount)
    }
    #expect(log.messages.map(\.text) == (990..<1_000).map { "m\($0)" })
    #expect(log.droppedCount == 990)
    #expect(largest <= 10 + 16, "the storage held \(largest) messages")
  }

  /// The same through a job whose work posts a thousand messages under a cap of 10.
  @Test func aJobsMessageStorageStaysBounded() async throws {
    let work = ScriptedWork(runs: [(0..<1_000).map { .post("m\($0)", .info) }])
    let job = Job(work, options: JobOptions(messageLimit: 10))
    job.start()
    _ = try await job.output
    let stored = job.state.withLock(owner: job) { $0.messageLog.storageCount }
    #expect(job.messages.count == 10)
    #expect(job.droppedMessageCount == 990)
    #expect(stored <= 10 + 16, "the storage held \(stored) messages")
  }
}
