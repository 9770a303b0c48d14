@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

/// Issue 30: a claim is `Observable` — its snapshot and its priority — so a SwiftUI row can hold
/// it in `@State` and redraw when its key changes.
@Suite("ContentLoader claims are Observable (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderClaimObservationTests {
  @Test func trackingTheSnapshotSeesTheKeysNextChange() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    let changes = Counter()
    let seen = withObservationTracking { claim.snapshot } onChange: { changes.increment() }
    #expect(seen.status == .loading && changes.count == 0)
    source.resolve(1, "one", version: 1)
    await eventually { changes.count == 1 }
    #expect(claim.snapshot.value == "one")
    // A local write is a change too; tracking is one-shot, so track again.
    let again = Counter()
    _ = withObservationTracking { claim.snapshot } onChange: { again.increment() }
    loader.set("edited", version: 2, for: 1)
    #expect(again.count == 1)  // delivered before `set` returns (this thread drains)
    claim.end()
  }

  @Test func trackingThePrioritySeesItChange() {
    let loader = Loader(idleTimeout: nil, load: { _ in ("never", 0) })
    let claim = loader.begin(1, priority: .prefetch)
    let changes = Counter()
    let seen = withObservationTracking { claim.priority } onChange: { changes.increment() }
    #expect(seen == .prefetch)
    claim.priority = .visible
    #expect(changes.count == 1)
    #expect(claim.priority == .visible)
    claim.end()
  }

  /// A claim's snapshot is its key's, also after the claim ended (``Claim/snapshot``): tracking it
  /// sees the key's changes, through the key's loadable, without a sink of the claim's own.
  @Test func trackingFollowsTheKeyAndAddsNoObserverToTheClaim() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    let other = loader.begin(1)
    await source.waitForStarts(1)
    let changes = Counter()
    _ = withObservationTracking { claim.snapshot } onChange: { changes.increment() }
    // Reading the snapshot added nothing to the claim: its end is the fast path's counter.
    #expect(loader.withState { _ in claim.entry?.sinks.isEmpty } == true)
    claim.end()
    source.resolve(1, "one", version: 1)
    await eventually { changes.count == 1 }
    #expect(claim.snapshot.value == "one")
    other.end()
  }

  /// The key's place in the load limit's queue is no status change of its loadable: trackers are
  /// told when the load gets its slot.
  @Test func trackingSeesTheLoadLeaveTheQueue() async {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let queued = loader.begin(1)
    let changes = Counter()
    let seen = withObservationTracking { queued.snapshot } onChange: { changes.increment() }
    #expect(seen.isWaitingForSlot)
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    await eventually { changes.count == 1 }
    #expect(!queued.snapshot.isWaitingForSlot && queued.snapshot.status == .loading)
    running.end()
    queued.end()
  }
}
