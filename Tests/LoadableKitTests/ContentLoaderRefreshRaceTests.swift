import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// `refresh(_:)` of a claimed key decides in one step, with the key's loadable, whether a load is
/// running: a load that starts on another thread while the refresh is under way is followed by
/// the refresh's own load, as any load running at a refresh is.
@Suite("ContentLoader refresh race", .timeLimit(.minutes(1)))
struct ContentLoaderRefreshRaceTests {
  /// The refresh finds the key loaded; before it acts, a caller's `sync()` starts a load on
  /// another thread. (Tasks cannot reach that moment, the refresh runs under the loader's lock
  /// from start to end: the seam runs the other thread's start there, and waits for the fact
  /// that it started, not for a time.) That load fails; the refresh must still load after it.
  @Test func aLoadStartingWhileARefreshActsIsFollowedByTheRefreshsLoad() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    source.resolve(1, "v1", version: 1)
    await eventually { claim.snapshot.status == .loaded }
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    let loadable = loader.loadable(for: 1)
    ContentLoaderSeams.$beforeRefreshActs.withValue({
      // The caller's load starts at once; telling the loader of it waits for the refresh to end.
      Thread { loadable.sync() }.start()
      while loadable.statusMirror.load(ordering: .acquiring) != LoadStatus.loading.code {}
    }) {
      loader.refresh(1)
    }
    await source.waitForStarts(2)
    source.fail(1, Boom())  // the caller's load, which the refresh found running
    await events.skip(until: "failed(1, Boom(code: 0))")
    // The failure is told in the same step that starts the refresh's load.
    try #require(claim.snapshot.status == .loading)
    await source.waitForStarts(3)
    source.resolve(1, "v2", version: 2)
    await eventually { claim.snapshot.value == "v2" }
    #expect(claim.snapshot.status == .loaded)
    claim.end()
  }
}
