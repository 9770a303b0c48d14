import Foundation
import LoadableKit
import LoadableKitTesting
import Testing

/// The task pattern of the ArcGIS "Tasks and jobs" guide, built from an `AsyncLoadable` and
/// `Job`s: the task loads its service metadata once; the metadata provides default parameters;
/// every operation loads the task first; a quick operation returns its result directly and a long
/// one returns a job.
final class CountingTask: AsyncLoadable<CountingTask.Metadata>, @unchecked Sendable {
  struct Metadata: Sendable {
    var defaultUnits: Int
    var serviceName: String
  }

  let metadataLoads = Counter()
  let failsToLoad: Bool

  init(failsToLoad: Bool = false) {
    self.failsToLoad = failsToLoad
    super.init()
  }

  override func performLoad() async throws -> Metadata {
    metadataLoads.increment()
    if failsToLoad { throw JobTestFailure(reason: "service unavailable") }
    return Metadata(defaultUnits: 4, serviceName: "counting service")
  }

  /// Parameters initialized with the service's defaults, to adjust before an operation.
  func makeDefaultParameters() async throws -> CountingWork {
    let metadata = try await fetchIfNeeded()
    return CountingWork(units: metadata.defaultUnits)
  }

  /// A quick operation: loads the task, then returns its result directly.
  func sum(of values: [Int]) async throws -> Int {
    try await load()
    return values.reduce(0, +)
  }

  /// A long operation: loads the task, then returns a job for the caller to start.
  func countJob(with parameters: CountingWork, options: JobOptions = JobOptions()) async throws -> Job<CountingWork> {
    try await load()
    return Job(parameters, options: options)
  }
}

@Suite("Jobs: the task pattern", .timeLimit(.minutes(1)))
struct JobsTaskPatternTests {
  @Test func aTaskLoadsItsMetadataOnceAndReturnsJobs() async throws {
    let task = CountingTask()
    #expect(task.loadStatus == .notLoaded)
    var parameters = try await task.makeDefaultParameters()
    #expect(task.loadStatus == .loaded)
    #expect(parameters.units == 4, "the defaults come from the metadata")
    parameters.units = 6  // adjust before running

    let job = try await task.countJob(with: parameters)
    #expect(job.status == .notStarted, "the task returns the job; the caller starts it")
    let statuses = Recorder<JobStatus>()
    let output: Int = try await withCheckedThrowingContinuation { continuation in
      job.start(statusHandler: { statuses.append($0) }) { continuation.resume(with: $0) }
    }
    #expect(output == parameters.expectedOutput)
    #expect(statuses.values.last == .succeeded)
    #expect(try await task.sum(of: [1, 2, 3]) == 6)
    #expect(task.metadataLoads.count == 1, "every operation shares the one metadata load")
  }

  @Test func operationsFailWhenTheTaskDoesNotLoad() async throws {
    let task = CountingTask(failsToLoad: true)
    await #expect(throws: JobTestFailure(reason: "service unavailable")) { try await task.makeDefaultParameters() }
    await #expect(throws: JobTestFailure(reason: "service unavailable")) {
      try await task.countJob(with: CountingWork(units: 1))
    }
    await #expect(throws: JobTestFailure(reason: "service unavailable")) { try await task.sum(of: [1]) }
    #expect(task.metadataLoads.count == 1, "a failed load is sticky until retried")
  }
}
