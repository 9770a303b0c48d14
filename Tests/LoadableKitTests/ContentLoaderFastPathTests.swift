@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The claim fast path (issue 13): `begin` on a key other claims hold, and `end` of a claim that
/// is not the key's last, only count, under the loader's lock, specialized for the caller. These
/// are the cases where that would be wrong: each must take the general path.
@Suite("ContentLoader claim fast path (issue 13)", .timeLimit(.minutes(1)))
struct ContentLoaderFastPathTests {
  /// A loader whose key 0 is loaded and held by one claim (returned, with the source), so that the next claims on
  /// it take the fast path.
  private func loaderWithKeyZeroLoadedAndHeld() async -> (Loader, Loader.Claim, KeyedSource) {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, load: { try await source.load($0) })
    let holder = loader.begin(0)
    await source.waitForStarts(1)
    source.resolve(0, "zero", version: 1)
    await eventually { holder.snapshot.status == .loaded }
    return (loader, holder, source)
  }

  private func limited(_ source: KeyedSource) -> Loader {
    Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
  }

  @Test func aSecondClaimAtAHigherPriorityStillRaisesTheWaitingLoad() async {
    let source = KeyedSource()
    let loader = limited(source)
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let other = loader.begin(2, priority: .prefetch)  // queued first
    let low = loader.begin(1, priority: .prefetch)
    await eventually { loader.limiter!.waitingCount == 2 }  // both queued at prefetch
    let raised = loader.begin(1, priority: .visible)  // a held key: the second claim raises it
    #expect(low.priority == .prefetch && raised.priority == .visible)
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[1] == 1 && source.stats.startedPerKey[2] == nil)
    for claim in [running, low, other, raised] { claim.end() }
  }

  @Test func endingTheOnlyClaimAtTheHighestPriorityStillLowersTheWaitingLoad() async {
    let source = KeyedSource()
    let loader = limited(source)
    let running = loader.begin(0)
    await source.waitForStarts(1)
    let high = loader.begin(1)  // visible, queued first
    let low = loader.begin(1, priority: .background)
    let other = loader.begin(2)  // visible, queued second
    await eventually { loader.limiter!.waitingCount == 2 }
    high.end()  // not the key's last claim, but its priority falls to background
    source.resolve(0, "zero", version: 1)
    await source.waitForStarts(2)
    #expect(source.stats.startedPerKey[2] == 1 && source.stats.startedPerKey[1] == nil)
    for claim in [running, low, other] { claim.end() }
  }

  @Test func endingAClaimWithAnUpdateStreamFinishesItWhileOthersHoldTheKey() async {
    let (loader, holder, _) = await loaderWithKeyZeroLoadedAndHeld()
    let watched = loader.begin(0)
    let updates = watched.updates(bufferingPolicy: .unbounded)
    watched.end()
    var received: [LoadStatus] = []
    for await snapshot in updates { received.append(snapshot.status) }  // ends: the stream finished
    #expect(received == [.loaded])
    #expect(!watched.isActive && holder.isActive)
    holder.end()
  }

  @Test func claimsCountedByTheFastPathKeepTheKeyClaimedUntilTheLastEnds() async {
    let (loader, holder, source) = await loaderWithKeyZeroLoadedAndHeld()
    let entry = loader.withState { $0.index[0] }!
    var claims = (0..<3).map { _ in loader.begin(0) }
    #expect(loader.withState { _ in entry.claimCount } == 4)
    claims[0].end()
    claims[0].end()  // a second end does nothing
    #expect(loader.withState { _ in entry.claimCount } == 3)
    claims.removeAll()  // deallocated: two end by their deinit, the ended one does nothing
    #expect(loader.withState { _ in entry.claimCount } == 1)
    #expect(loader.withState { _ in entry.isIdleLinked } == false)
    holder.end()
    #expect(loader.withState { _ in entry.claimCount == 0 && entry.isIdleLinked })
    #expect(source.stats.started == 1)
  }
}
