@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 30: "waiting for a slot" told from "loading" — a snapshot says whether its key's load
/// waits for a slot of `maximumConcurrentLoads`; the loader says how many loads wait and run.
@Suite("ContentLoader queued state (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderQueueStateTests {
  @Test func aQueuedKeySaysSoAndItsClaimHearsWhenItGetsItsSlot() async {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let seen = Recorder<String>()
    let queued = loader.begin(1) { seen.append("\($0.status)\($0.isWaitingForSlot ? " queued" : "")") }
    #expect(running.snapshot.status == .loading && !running.snapshot.isWaitingForSlot)
    #expect(queued.snapshot.status == .loading && queued.snapshot.isWaitingForSlot)
    #expect(loader.snapshot(for: 1)?.isWaitingForSlot == true)
    #expect(loader.loadCounts == (waiting: 1, running: 1))
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    // Its claim is told, without a status change: loading, no longer queued.
    await eventually { seen.values.last == "loading" }
    #expect(seen.values.first == "loading queued")
    #expect(!queued.snapshot.isWaitingForSlot)
    #expect(loader.loadCounts == (waiting: 0, running: 1))
    source.resolve(1, "one", version: 1)
    await eventually { queued.snapshot.status == .loaded }
    #expect(!queued.snapshot.isWaitingForSlot)
    #expect(loader.loadCounts == (waiting: 0, running: 0))
    running.end()
    queued.end()
  }

  @Test func withoutALimitNothingWaitsAndTheLoadingKeysRun() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claims = (0..<3).map { loader.begin($0) }
    await source.waitForStarts(3)
    #expect(claims.allSatisfy { !$0.snapshot.isWaitingForSlot })
    #expect(loader.loadCounts == (waiting: 0, running: 3))
    source.resolve(1, "one", version: 1)
    await eventually { claims[1].snapshot.status == .loaded }
    #expect(loader.loadCounts == (waiting: 0, running: 2))
    for claim in claims { claim.end() }
  }
}
