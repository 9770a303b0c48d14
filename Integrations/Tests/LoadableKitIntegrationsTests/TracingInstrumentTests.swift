import InMemoryTracing
@testable import LoadableKit
import LoadableKitTesting
import LoadableKitTracing
import Testing

@Suite(.timeLimit(.minutes(1))) struct TracingInstrumentTests {
  /// map ← (parks ← table, trails ← table): the spans form the tree of who asked for whom.
  @Test func spansFormTheTreeOfTheAttemptsThatAskedForThem() async throws {
    let tracer = InMemoryTracer()
    let instrument = TracingInstrument(tracer: tracer)
    let control = ControlledLoad<String>()
    let table = control.makeLoadable().named("table")
    let parks = table.map { "parks on \($0)" }.named("parks")
    let trails = AsyncLoadable(name: "trails") { "trails" }
    trails.addDependency(table)
    let map = AsyncLoadable(name: "map") { "map" }
    map.addDependency(parks)
    map.addDependency(trails)
    for loadable in [table, parks, trails, map] { loadable.instrument = instrument }

    let load = Task { try await map.load() }
    try await control.waitForStart()
    // The table is held until both layers wait for its one attempt.
    await eventually { table.waiterCount == 2 }
    #expect(control.resolve("table"))
    try await load.value

    let spans = tracer.finishedSpans
    #expect(spans.count == 4)
    #expect(instrument.openSpanCount == 0)
    let byName = Dictionary(uniqueKeysWithValues: spans.map { ($0.operationName, $0) })
    let root = try #require(byName["map"])
    #expect(root.parentSpanID == nil)
    #expect(byName["parks"]?.parentSpanID == root.spanID)
    #expect(byName["trails"]?.parentSpanID == root.spanID)
    let tableParent = try #require(byName["table"]?.parentSpanID)
    let layerSpanIDs = ["parks", "trails"].compactMap { byName[$0]?.spanID }
    #expect(layerSpanIDs.contains(tableParent))
    #expect(Set(spans.map(\.traceID)).count == 1)
    #expect(root.attributes["loadable.outcome"]?.toSpanAttribute() == "loaded")
    #expect(byName["table"]?.attributes["loadable.callers"]?.toSpanAttribute() == 2)
  }

  @Test func aFailureRecordsTheErrorAndARetryAnEvent() async throws {
    let tracer = InMemoryTracer()
    let instrument = TracingInstrument(tracer: tracer)
    let clock = TestClock()
    let portal = flaky("portal", failures: 1)
    portal.loadOptions = LoadOptions(retryPolicy: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: 0), clock: clock)
    let broken = AsyncLoadable<String>(name: "broken") { throw Boom(code: 404) }
    let screen = zip(portal, broken)
    for loadable in [portal, broken] { loadable.instrument = instrument }
    screen.instrument = instrument

    let load = Task { try await screen.load() }
    await #expect(throws: Boom.self) { try await load.value }
    // The zip failed fast: the portal, waiting for its retry, was cancelled by the cascade.
    await eventually { tracer.finishedSpans.count == 3 }

    let byName = Dictionary(uniqueKeysWithValues: tracer.finishedSpans.map { ($0.operationName, $0) })
    let zipSpan = try #require(byName["zip(2)"])
    #expect(byName["broken"]?.parentSpanID == zipSpan.spanID)
    #expect(byName["broken"]?.errors.count == 1)
    #expect(byName["broken"]?.status?.code == .error)
    #expect(zipSpan.status?.code == .error)
    #expect(byName["portal"]?.events.map(\.name) == ["retry"])
    #expect(byName["portal"]?.attributes["loadable.outcome"]?.toSpanAttribute() == "cancelled")
    #expect(byName["portal"]?.status == nil)
  }
}
