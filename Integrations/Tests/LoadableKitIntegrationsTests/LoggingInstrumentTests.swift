import InMemoryLogging
import LoadableKit
import LoadableKitLogging
import LoadableKitTesting
import Logging
import Testing

@Suite(.timeLimit(.minutes(1))) struct LoggingInstrumentTests {
  @Test func oneLinePerFailureAndPerRetryAtTheLevelsSet() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "loading", factory: { _ in handler })
    logger.logLevel = .trace
    let instrument = LoggingInstrument(logger: logger, failureLevel: .critical, retryLevel: .notice)
    let clock = TestClock()
    let portal = flaky("portal", failures: 1)
    portal.loadOptions = LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), clock: clock)
    let broken = AsyncLoadable<String>(name: "broken") { throw Boom(code: 404) }
    let fine = AsyncLoadable(name: "fine") { "fine" }
    for loadable in [portal, broken, fine] { loadable.instrument = instrument }

    let load = Task { try await portal.load() }
    try await clock.waitForSleepers()
    await clock.advance(by: .seconds(1))
    try await load.value
    await #expect(throws: Boom.self) { try await broken.load() }
    try await fine.load()

    let entries = handler.entries
    #expect(entries.count == 2)
    #expect(entries.map(\.level) == [.notice, .critical])
    #expect(entries.first?.message.description == "portal will retry (1) in 1000 ms after: Boom 503")
    #expect(entries.last?.message.description.hasPrefix("broken failed in ") == true)
    #expect(entries.last?.message.description.hasSuffix(": Boom 404") == true)
    #expect(entries.last?.metadata["loadable.name"] == "broken")
    #expect(entries.last?.metadata["loadable.intent"] == "load")
  }

  @Test func successesAndCancellationsAreLoggedOnlyWhenTheirLevelIsSet() async throws {
    let handler = InMemoryLogHandler()
    let logger = Logger(label: "loading", factory: { _ in handler })
    let instrument = LoggingInstrument(logger: logger, cancellationLevel: .info, successLevel: .info)
    let fine = AsyncLoadable(name: "fine") { "fine" }
    fine.instrument = instrument
    try await fine.load()
    let control = ControlledLoad<String>()
    let slow = control.makeLoadable().named("slow")
    slow.instrument = instrument
    let slowLoad = Task { try await slow.load() }
    try await control.waitForStart()
    slow.cancelLoad()
    _ = try? await slowLoad.value
    await eventually { handler.entries.count == 2 }
    #expect(handler.entries.map { $0.message.description.components(separatedBy: " in ")[0] } == ["fine loaded", "slow cancelled"])
  }
}
