import LoadableKit
import LoadableKitMetrics
import LoadableKitTesting
import MetricsTestKit
import Testing

@Suite(.timeLimit(.minutes(1))) struct MetricsInstrumentTests {
  @Test func countsMatchWhatHappened() async throws {
    let metrics = TestMetrics()
    let instrument = MetricsInstrument(factory: metrics)
    let clock = TestClock()

    // Two retries, then loaded.
    let portal = flaky("portal", failures: 2)
    portal.loadOptions = LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), jitter: 0), clock: clock)
    portal.instrument = instrument
    let load = Task { try await portal.load() }
    try await clock.waitForSleepers()
    await clock.advance(by: .seconds(1))
    try await clock.waitForSleepers()
    await clock.advance(by: .seconds(2))
    try await load.value

    // Fails twice, a keyed-style name: counted without its subscript.
    let item = AsyncLoadable<String>(name: "items[7]") { throw Boom(code: 500) }
    item.instrument = instrument
    await #expect(throws: Boom.self) { try await item.load() }
    await #expect(throws: Boom.self) { try await item.retryLoad() }

    // Cancelled.
    let control = ControlledLoad<String>()
    let slow = control.makeLoadable().named("slow")
    slow.instrument = instrument
    let slowLoad = Task { try await slow.load() }
    try await control.waitForStart()
    slow.cancelLoad()
    _ = try? await slowLoad.value
    await eventually { (try? metrics.expectCounter("loadable_cancellations_total", [("name", "slow")]))?.totalValue == 1 }

    #expect(try metrics.expectCounter("loadable_attempts_total", [("name", "portal"), ("intent", "load")]).totalValue == 1)
    #expect(try metrics.expectCounter("loadable_retries_total", [("name", "portal")]).totalValue == 2)
    #expect(metrics.counters(label: "loadable_failures_total", dimensions: [("name", "portal")]).isEmpty)
    #expect(try metrics.expectCounter("loadable_attempts_total", [("name", "items[]"), ("intent", "load")]).totalValue == 1)
    #expect(try metrics.expectCounter("loadable_attempts_total", [("name", "items[]"), ("intent", "retry")]).totalValue == 1)
    #expect(try metrics.expectCounter("loadable_failures_total", [("name", "items[]")]).totalValue == 2)
    #expect(try metrics.expectCounter("loadable_cancellations_total", [("name", "slow")]).totalValue == 1)
    #expect(try metrics.expectTimer("loadable_attempt_duration", [("name", "portal"), ("outcome", "loaded")]).values.count == 1)
    #expect(try metrics.expectTimer("loadable_attempt_duration", [("name", "items[]"), ("outcome", "failed")]).values.count == 2)
    #expect(try metrics.expectRecorder("loadable_attempt_callers", [("name", "portal")]).lastValue == 1)
    let running = try metrics.expectMeter("loadable_attempts_running")
    #expect(running.lastValue == 0)
    #expect(running.values.count == 8)  // four attempts, each +1 then -1
  }

  @Test func jobsRunningIsAGaugeOfStartedJobs() throws {
    let metrics = TestMetrics()
    let instrument = MetricsInstrument(factory: metrics)
    instrument.jobReported(JobReport(job: "download", id: 1, event: .status(.started)))
    instrument.jobReported(JobReport(job: "download", id: 2, event: .status(.started)))
    instrument.jobReported(JobReport(job: "download", id: 1, event: .status(.paused)))
    instrument.jobReported(JobReport(job: "download", id: 1, event: .status(.canceling)))
    #expect(try metrics.expectMeter("loadable_jobs_running").lastValue == 1)
    instrument.jobReported(JobReport(job: "download", id: 2, event: .status(.succeeded)))
    #expect(try metrics.expectMeter("loadable_jobs_running").lastValue == 0)
  }

  @Test func claimsActiveIsAGaugePerLoader() throws {
    let metrics = TestMetrics()
    let instrument = MetricsInstrument(factory: metrics)
    let claim = LoadClaimReport(loader: "thumbnails", key: "7", id: 1)
    instrument.claimBegan(claim)
    instrument.claimBegan(LoadClaimReport(loader: "thumbnails", key: "8", id: 2))
    instrument.claimEnded(claim, duration: .milliseconds(5))
    #expect(try metrics.expectMeter("loadable_claims_active", [("loader", "thumbnails")]).lastValue == 1)
  }
}
