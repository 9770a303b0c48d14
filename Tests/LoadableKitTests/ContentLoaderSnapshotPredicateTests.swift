@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 30: `refresh(matching:)` and `invalidate(matching:)` choose keys by what they hold —
/// their snapshots — decided atomically with the loader's state, the predicate outside the lock.
@Suite("ContentLoader refresh and invalidate by snapshot (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderSnapshotPredicateTests {
  /// Keys 0..<count claimed and loaded, key k with version k.
  static func loadedKeys(_ loader: Loader, _ source: KeyedSource, count: Int) async -> [Loader.Claim] {
    let claims = (0..<count).map { loader.begin($0) }
    await source.waitUntil { $0.pending == count }
    for key in 0..<count { source.resolve(key, "v\(key)", version: key) }
    await eventually { claims.allSatisfy { $0.snapshot.status == .loaded } }
    return claims
  }

  @Test func refreshMatchingChoosesByVersion() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claims = await Self.loadedKeys(loader, source, count: 4)
    let refreshed = loader.refresh(matching: { ($0.version ?? 0) < 2 })
    #expect(Set(refreshed) == [0, 1])
    await source.waitUntil { $0.pending == 2 }
    #expect(source.stats.startedPerKey == [0: 2, 1: 2, 2: 1, 3: 1])
    for key in 0..<2 { source.resolve(key, "w\(key)", version: 10) }
    await eventually { claims[0].snapshot.value == "w0" && claims[1].snapshot.value == "w1" }
    for claim in claims { claim.end() }
  }

  @Test func invalidateMatchingMarksTheFailedKeysStale() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claims = (0..<2).map { loader.begin($0) }
    await source.waitUntil { $0.pending == 2 }
    source.resolve(0, "zero", version: 1)
    source.fail(1, Boom())
    await eventually { claims[0].snapshot.status == .loaded && claims[1].snapshot.status == .failed }
    #expect(loader.invalidate(matching: { $0.status == .failed }) == [1])
    #expect(claims[1].snapshot.status == .failed)  // marked, not loaded
    #expect(loader.loadable(for: 1).needsSync && !loader.loadable(for: 0).needsSync)
    for claim in claims { claim.end() }
  }

  /// The predicate runs outside the lock (it calls the loader), and a key whose state changed
  /// between its snapshot and the decision — here, a write the predicate itself makes — is
  /// skipped: the predicate never saw its current state.
  @Test func aKeyThatChangedSinceItsSnapshotIsSkipped() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let claims = await Self.loadedKeys(loader, source, count: 3)
    let refreshed = loader.refresh(matching: { snapshot in
      if snapshot.key == 1 { loader.set("edited", version: 50, for: 1) }
      return (snapshot.version ?? 0) < 5
    })
    #expect(Set(refreshed) == [0, 2])
    #expect(claims[1].snapshot.status == .loaded && claims[1].snapshot.value == "edited")
    await source.waitUntil { $0.pending == 2 }
    #expect(source.stats.startedPerKey[1] == 1)
    for claim in claims { claim.end() }
  }
}
