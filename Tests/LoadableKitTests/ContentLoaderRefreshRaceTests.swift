import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// `refresh(_:)` of a claimed key decides in one step, with the key's loadable, whether a load is
/// running: a load that starts on another thread while the refresh is under way is superseded by
/// the refresh, as any load running at a refresh is (SPEC §5).
@Suite("ContentLoader refresh race", .timeLimit(.minutes(1)))
struct ContentLoaderRefreshRaceTests {
  /// The refresh finds the key loaded; before it acts, a caller's `sync()` starts a load on
  /// another thread. (Tasks cannot reach that moment, the refresh runs under the loader's lock
  /// from start to end: the seam runs the other thread's start there, and waits for the fact
  /// that it started, not for a time.) The refresh must see that load: it supersedes it (or,
  /// when its work has not started yet, counts as it, SPEC §5) — exactly one load is left to
  /// land, and the claim gets its outcome. Before issue 27 the refresh's load followed it.
  @Test func aLoadStartingWhileARefreshActsIsSupersededByTheRefresh() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = await claimLoaded(1, in: loader, from: source)
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    let loadable = loader.loadable(for: 1)
    ContentLoaderSeams.beforeRefreshActs.withValue({
      // The caller's load starts at once; telling the loader of it waits for the refresh to end.
      Thread { loadable.sync() }.start()
      while loadable.statusMirror.load(ordering: .acquiring) != LoadStatus.loading.code {}
    }) {
      loader.refresh(1)
    }
    // The load that lands: the caller's, when the refresh counted as it, or the refresh's own,
    // when it superseded the caller's (whose work was cancelled, synchronously, by then).
    await source.waitUntil { $0.pending >= 1 }
    #expect(source.stats.pending == 1)
    source.fail(1, Boom())
    await events.skip(until: "failed(1, Boom(code: 0))")
    #expect(claim.snapshot.status == .failed)
    #expect(source.stats.pending == 0, "no load follows the one the refresh saw")
    let started = source.stats.started
    loader.refresh(1)
    await source.waitForStarts(started + 1)
    source.resolve(1, "v2", version: 2)
    await eventually { claim.snapshot.value == "v2" }
    #expect(claim.snapshot.status == .loaded)
    claim.end()
  }

  /// The refresh finds a load running and joins it; before the loader reads the key, that load
  /// ends on another thread. The refresh must still load after it. Before the fix the refresh was
  /// marked pending only after that read, which had already seen the load end: it never loaded.
  @Test func aLoadEndingWhileARefreshJoinsItIsFollowedByTheRefreshsLoad() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    let loadable = loader.loadable(for: 1)
    let once = Atomic<Bool>(false)
    ContentLoaderSeams.afterInterestAdded.withValue({
      guard !once.exchange(true, ordering: .relaxed) else { return }
      // The running load returns now; telling the loader of it waits for the refresh to end.
      Thread { _ = source.resolve(1, "v1", version: 1) }.start()
      while loadable.statusMirror.load(ordering: .acquiring) != LoadStatus.loaded.code {}
    }) {
      loader.refresh(1)
    }
    await eventually { source.stats.started == 2 }
    #expect(source.stats.started == 2, "the refresh's own load")
    source.resolve(1, "v2", version: 2)
    await eventually { claim.snapshot.value == "v2" }
    claim.end()
  }

  /// The refresh finds the key loaded and idle; before it adds the claims' interest, a caller's
  /// `sync()` starts a load on another thread, which the refresh joins: its own load follows that
  /// one (which may carry data from before the change). When the refresh's load is then
  /// cancelled — its claims ended — the key must still be stale: the next claim loads it again
  /// (SPEC §5, "marks the key's value out of date"). Without the mark, the joined load's value
  /// was taken for fresh and the next claim loaded nothing.
  @Test func aRefreshWhoseLoadFollowedAJoinedOneAndWasCancelledLeavesTheKeyStale() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = await claimLoaded(1, in: loader, from: source)
    let loadable = loader.loadable(for: 1)
    ContentLoaderSeams.afterRefreshFoundNoLoad.withValue({
      // The caller's load starts at once; telling the loader of it waits for the refresh to end.
      Thread { loadable.sync() }.start()
      while loadable.statusMirror.load(ordering: .acquiring) != LoadStatus.loading.code {}
    }) {
      loader.refresh(1)
    }
    await source.waitForStarts(2)
    source.resolve(1, "v2", version: 2)  // the joined load: maybe from before the change
    await source.waitForStarts(3)  // the refresh's own load follows it
    #expect(claim.snapshot.value == "v2")
    claim.end()  // cancels the refresh's load, which only the claim wanted
    await eventually { source.stats.pending == 0 }
    let next = loader.begin(1)
    #expect(next.snapshot.status == .loading, "the key was refreshed: a new claim loads it")
    guard next.snapshot.status == .loading else { return next.end() }
    await source.waitForStarts(4)
    source.resolve(1, "v3", version: 3)
    await eventually { next.snapshot.value == "v3" }
    next.end()
  }

  /// A claim starts a load; before the loader reads the key, a `cancelLoad()` on another thread
  /// ends it, so its task never comes for the slot the claim reserved. The slot must come back.
  /// Before the fix it was kept for good: with a limit of one, no other key loaded again.
  @Test func aLoadCancelledBeforeTheLoaderSawItGivesItsSlotBack() async throws {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let loadable = loader.loadable(for: 1)
    let once = Atomic<Bool>(false)
    let claim = ContentLoaderSeams.afterInterestAdded.withValue({
      guard !once.exchange(true, ordering: .relaxed) else { return }
      Thread { loadable.cancelLoad() }.start()
      while loadable.statusMirror.load(ordering: .acquiring) == LoadStatus.loading.code {}
    }) {
      loader.begin(1)
    }
    await eventually { loader.limiter?.takenCount == 0 }
    #expect(loader.limiter?.takenCount == 0)
    let other = loader.begin(2)
    await eventually { source.stats.startedPerKey[2] == 1 }
    #expect(source.stats.startedPerKey[1] == nil)
    source.resolve(2, "two", version: 1)
    await eventually { other.snapshot.status == .loaded }
    claim.end()
    other.end()
  }

  /// A refresh or a removal supersedes a claimed key's running load and reserves a place of the
  /// limit for the fresh one; before the loader reads the key, a `cancelLoad()` on another thread
  /// ends the fresh load, so its task never comes for that place. The place must come back, as a
  /// claim's does (above). Found by a review: with a limit of one, no key loaded again.
  @Test(arguments: ["refresh", "remove"])
  func aFreshLoadCancelledBeforeTheLoaderSawItGivesItsPlaceBack(_ action: String) async throws {
    let source = KeyedSource()
    let loader = Loader(idleTimeout: nil, maximumConcurrentLoads: 1, load: { try await source.load($0) })
    let claim = loader.begin(1)
    await source.waitForStarts(1)  // its work started: the refresh supersedes it, not joins it
    let loadable = loader.loadable(for: 1)
    ContentLoaderSeams.afterLoadSuperseded.withValue({
      Thread { loadable.cancelLoad() }.start()
      // The fresh load ended (the key went back to how it was before the first load); telling
      // the loader of it waits for the refresh or removal to end.
      while loadable.statusMirror.load(ordering: .acquiring) == LoadStatus.loading.code {}
    }) {
      if action == "refresh" { loader.refresh(1) } else { loader.remove(1) }
    }
    // The superseded load's task was cancelled: its work returns and gives its slot back.
    await eventually { source.stats.pending == 0 }
    await eventually { loader.limiter?.takenCount == 0 && loader.limiter?.waitingCount == 0 }
    #expect(loader.limiter?.takenCount == 0)
    #expect(loader.limiter?.waitingCount == 0)
    let other = loader.begin(2)
    await eventually { source.stats.startedPerKey[2] == 1 }
    #expect(source.stats.startedPerKey[2] == 1, "another key loads under the limit")
    source.resolve(2, "two", version: 1)
    await eventually { other.snapshot.status == .loaded }
    claim.end()
    other.end()
  }
}
