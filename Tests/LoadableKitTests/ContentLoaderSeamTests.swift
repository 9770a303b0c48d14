@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A place for a loader that a user value's `deinit` calls back into.
final class LoaderSlot<L: AnyObject & Sendable>: Sendable {
  private let slot = Mutex<L?>(nil)
  func set(_ loader: L?) { slot.withLock(owner: self) { $0 = loader } }
  var loader: L? { slot.withLock(owner: self) { $0 } }
}

/// A value whose `deinit` is user code that reads the loader holding it.
final class Reentrant: Sendable, CustomStringConvertible {
  let name: String
  let onDeinit: @Sendable () -> Void
  init(_ name: String, onDeinit: @escaping @Sendable () -> Void) {
    self.name = name
    self.onDeinit = onDeinit
  }
  deinit { onDeinit() }
  var description: String { name }
}

/// An error whose `deinit` is user code that reads the loader holding it.
final class ReentrantError: Error, @unchecked Sendable {
  let onDeinit: @Sendable () -> Void
  init(onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
  deinit { onDeinit() }
}

@Suite("ContentLoader seams (issue 12)", .timeLimit(.minutes(1)))
struct ContentLoaderSeamTests {
  // MARK: - Defect 1: a keyed loadable poisoned by a claim

  @Test func aClaimThatCameAndWentDoesNotFailTheKeyedLoadable() async throws {
    let source = KeyedSource(autoResolve: true)
    let loader = makeLoader(source)
    let loadable = loader.loadable(for: 1)
    loader.begin(1).end()
    #expect(loadable.loadStatus != .failed)
    #expect(loadable.loadError == nil)
    try await loadable.load()
    #expect(loadable.loadStatus == .loaded)
    #expect(loadable.content?.hasPrefix("auto-1") == true)
  }

  @Test func zipOverAKeyedLoadableLoadsAfterAClaimCameAndWent() async throws {
    let source = KeyedSource(autoResolve: true)
    let loader = makeLoader(source)
    let loadable = loader.loadable(for: 1)
    let pair = zip(loadable, AsyncLoadable(content: 2))
    loader.begin(1).end()
    try await pair.load()
    #expect(pair.content?.1 == 2)
    #expect(loadable.loadStatus == .loaded)
  }

  @Test func mapOverAKeyedLoadableLoadsAfterAClaimCameAndWent() async throws {
    let source = KeyedSource(autoResolve: true)
    let loader = makeLoader(source)
    let loadable = loader.loadable(for: 1)
    let upper = loadable.map { $0.uppercased() }
    loader.begin(1).end()
    try await upper.load()
    #expect(upper.content?.hasPrefix("AUTO-1") == true)
  }

  @Test func aClaimEndingLeavesACallersOwnLoadRunning() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let loadable = loader.loadable(for: 1)
    let claim = loader.begin(1)  // the claim starts the key's attempt
    await source.waitForStarts(1)
    let load = Task { try await loadable.load() }  // a caller joins it and waits
    await eventually { loadable.waiterCount == 1 }
    claim.end()  // the caller still waits: the attempt goes on
    #expect(loadable.loadStatus == .loading)
    source.resolve(1, "one", version: 1)
    try await load.outcome
    #expect(loadable.content == "one")
    #expect(source.stats.cancelled == 0)
  }

  @Test func theKeyedLoadableIsTheKeysEntry() async throws {
    let source = KeyedSource()
    let loader = makeLoader(source, prior: { _ in ("cached", 1) })
    let loadable = loader.loadable(for: 1)
    let claim = loader.begin(1)
    #expect(loadable.loadStatus == .loading)
    await source.waitForStarts(1)
    source.resolve(1, "fresh", version: 2)
    await eventually { loadable.loadStatus == .loaded }
    #expect(claim.snapshot.value == "fresh")
    #expect(loader.loadable(for: 1) === loadable)
    claim.end()
  }

  // MARK: - Defect 2: user values released under the loader's lock

  @Test func anErrorDroppedAtEvictionMayReadTheLoader() async {
    let slot = LoaderSlot<Loader>()
    let released = Counter()
    let loader = Loader(maximumIdleCount: 0) { _ in
      throw ReentrantError {
        _ = slot.loader?.count
        released.increment()
      }
    }
    slot.set(loader)
    let claim = loader.begin(1)
    await eventually { loader.snapshot(for: 1)?.status == .failed }
    claim.end()  // idle beyond a count of 0: evicted, and the error with it
    await eventually { released.count == 1 }
    #expect(loader.count == 0)
    slot.set(nil)
  }

  @Test func anErrorReplacedByRefreshMayReadTheLoader() async {
    let slot = LoaderSlot<Loader>()
    let released = Counter()
    let attempts = Counter()
    let loader = Loader { key in
      if attempts.increment() == 1 {
        throw ReentrantError {
          _ = slot.loader?.snapshot(for: key)
          released.increment()
        }
      }
      return ("ok", 1)
    }
    slot.set(loader)
    let claim = loader.begin(1)
    await eventually { loader.snapshot(for: 1)?.status == .failed }
    loader.refresh(1)
    await eventually { loader.snapshot(for: 1)?.status == .loaded }
    await eventually { released.count == 1 }
    claim.end()
    slot.set(nil)
  }

  @Test func valuesDroppedAtEvictionRefreshAndCancelMayReadTheLoader() async throws {
    typealias ValueLoader = ContentLoader<Int, Reentrant, Int>
    let slot = LoaderSlot<ValueLoader>()
    let released = Counter()
    let versions = Counter()
    let control = ControlledLoad<Int>()
    let never = ControlledLoad<Int>()
    let loader = ValueLoader(
      maximumIdleCount: 0,
      existingValue: { key in
        (Reentrant("prior") { _ = slot.loader?.count; released.increment() }, 0)
      },
      load: { key in
        _ = try await (key == 1 ? never : control).operation()
        let version = versions.increment()
        return (Reentrant("v\(version)") { _ = slot.loader?.snapshot(for: key); released.increment() }, version)
      })
    slot.set(loader)
    // Cancel: the claim that started the load ends; the key goes back to its prior value.
    loader.begin(1).end()
    // Refresh: the loaded value is replaced by a newer one.
    let claim = loader.begin(2)
    try await control.waitForStart()
    control.resolve(0)
    await eventually { loader.snapshot(for: 2)?.status == .loaded }
    loader.refresh(2)
    try await control.waitForStart(2)
    control.resolve(0)
    await eventually { loader.snapshot(for: 2)?.value?.name == "v2" }
    // Eviction: the last claim ends with no idle entries allowed.
    claim.end()
    #expect(loader.count == 0)
    await eventually { released.count >= 4 }
    slot.set(nil)
  }

  @Test func valuesReleasedWithTheLoaderAreReleasedOutsideItsLock() async {
    let released = Counter()
    var loader: ContentLoader<Int, Reentrant, Int>? = ContentLoader(
      idleTimeout: nil,
      load: { _ in (Reentrant("v") { released.increment() }, 1) })
    do {
      let claim = loader!.begin(1)
      await eventually { loader!.snapshot(for: 1)?.status == .loaded }
      claim.end()
    }
    loader = nil
    await eventually { released.count == 1 }
  }

  @Test func aHandlerReleasedAtTheEndOfItsClaimMayReadTheLoader() async {
    let slot = LoaderSlot<Loader>()
    let released = Counter()
    let loader = Loader { key in ("v\(key)", 1) }
    slot.set(loader)
    var claim: Loader.Claim? = loader.begin(1) {
      [witness = Reentrant("witness") { _ = slot.loader?.count; released.increment() }] _ in _ = witness
    }
    _ = claim
    claim = nil
    await eventually { released.count == 1 }
    slot.set(nil)
  }
}
