@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a `ContentLoader` key's version table stays bounded.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

extension ContentLoader.KeyedLoadable {
  /// How many versions the key's table holds (test-visible size of ``ContentLoader/Versions``).
  var versionTableSize: Int { withVersions { $0.slots.count } }
}

@Suite("Promises: a key's version table stays bounded", .timeLimit(.minutes(1)))
struct PromiseVersionTableTests {

  /// A key refreshed a thousand times keeps the versions of its current content and of the load
  /// that may replace it, not one per load.
  @Test func aKeysVersionTableStaysBoundedUnderRefreshes() async throws {
    let loads = Counter()
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { _ in
      let version = loads.increment()
      return (version, version)
    }
    let claim = loader.begin(1)
    await eventually { claim.snapshot.status == .loaded }
    let entry = try #require(loader.loadable(for: 1) as? ContentLoader<Int, Int, Int>.KeyedLoadable)
    var largest = entry.versionTableSize
    for round in 2...1_001 {
      loader.refresh(1)
      await eventually { claim.snapshot.status == .loaded && claim.snapshot.version == round }
      largest = max(largest, entry.versionTableSize)
    }
    #expect(claim.snapshot.value == 1_001)
    #expect(largest <= 2, "the version table held \(largest) versions")
    claim.end()
  }

  /// A key written a thousand times (`set(_:version:for:)`, each value newer) keeps the version
  /// of its current content, not one per write: a write prunes the table as a load's result does.
  @Test func aKeysVersionTableStaysBoundedUnderWrites() async throws {
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { key in (key, 0) }
    let claim = loader.begin(1)
    await eventually { claim.snapshot.status == .loaded }
    let entry = try #require(loader.loadable(for: 1) as? ContentLoader<Int, Int, Int>.KeyedLoadable)
    var largest = entry.versionTableSize
    for version in 1...1_000 {
      #expect(loader.set(version * 10, version: version, for: 1), "write \(version) refused")
      largest = max(largest, entry.versionTableSize)
    }
    #expect(claim.snapshot.value == 10_000 && claim.snapshot.version == 1_000)
    #expect(largest <= 2, "the version table held \(largest) versions")
    claim.end()
  }
}
