@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25: every bounded structure has a test-visible size, and a test that drives it past its
// bound and checks the storage itself, not only what the public API shows. Each was seen failing
// with a quiet bug planted in the library (the commit that added it says which).

extension ContentLoader {
  /// How many keys' loadables the loader remembers as handed out by ``loadable(for:)``.
  var handedOutCount: Int { state.withLock(owner: self) { $0.handedOut.count } }
}

extension AsyncLoadable {
  /// How many status observers and streams are registered, and how many notifications are queued.
  var observerStorage: (entries: Int, queued: Int) {
    state.withLock(owner: self) { ($0.extras?.observers.entries.count ?? 0, $0.extras?.observers.queue.count ?? 0) }
  }
}

@Suite("Promises: bounded structures stay bounded", .timeLimit(.minutes(1)))
struct PromiseBoundsTests {

  /// Observers that end — a cancelled observation, a dropped status stream — leave no entry in
  /// the loadable's registry, and nothing stays queued once the changes were delivered.
  @Test func endedObserversLeaveNothingInTheRegistry() async throws {
    let loadable = AsyncLoadable<Int> { 1 }
    try await loadable.load()
    for _ in 0..<1_000 {
      let observation = loadable.observeLoadStatus { _ in }
      observation.cancel()
      var statuses = loadable.loadStatusUpdates.makeAsyncIterator()
      #expect(await statuses.next() == .loaded)
    }
    let kept = loadable.observeLoadStatus { _ in }
    for _ in 0..<100 { _ = try await loadable.fetch() }
    let storage = loadable.observerStorage
    #expect(storage.entries == 1, "the registry held \(storage.entries) observers")
    #expect(storage.queued == 0)
    kept.cancel()
    #expect(loadable.observerStorage.entries == 0)
  }

  /// A thousand keys' loadables handed out and dropped: the loader forgets each once it is gone.
  /// (A loaded one stays, as the key's idle entry, and so does its hand-out record.)
  @Test func droppedHandedOutLoadablesAreForgotten() async throws {
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { key in (key, 1) }
    for key in 0..<1_000 {
      let loadable = loader.loadable(for: key)
      if key.isMultiple(of: 10) { #expect(try await loadable.fetch() == key) }
    }
    #expect(loader.count == 100)  // the loaded ones, idle
    #expect(loader.handedOutCount <= loader.count, "the loader remembers \(loader.handedOutCount) loadables")
  }

  /// A loader's event stream that nobody reads keeps the newest 1,000 events by default.
  @Test func anUnreadEventStreamIsBoundedByDefault() async throws {
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { key in (key, 1) }
    let events = loader.events
    for key in 0..<1_500 {
      let claim = loader.begin(key)
      await eventually { claim.snapshot.status == .loaded }
      claim.end()
    }
    // A claim's snapshot is loaded before the event is delivered: wait until the last key's events
    // were handed to the stream (a later key's, seen on a second stream, come after them), so none
    // arrives while the stream is read (one did, once: 1,001 read).
    let probe = loader.events
    let last = loader.begin(1_500)
    for await event in probe {
      if case .loaded(1_500, _, _) = event { break }
    }
    last.end()
    var count = 0
    for await event in events {
      count += 1
      if case .loaded(1_499, _, _) = event { break }
    }
    #expect(count <= 1_000, "the stream held \(count) events")
    #expect(count > 0)
  }

  /// A claim's update stream that nobody reads keeps the latest snapshot only, by default, while
  /// its key refreshes a hundred times.
  @Test func anUnreadClaimUpdateStreamKeepsTheLatestSnapshot() async throws {
    let loads = Counter()
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { _ in
      let version = loads.increment()
      return (version, version)
    }
    let claim = loader.begin(1)
    let updates = claim.updates
    await eventually { claim.snapshot.status == .loaded }
    for round in 2...101 {
      loader.refresh(1)
      await eventually { claim.snapshot.status == .loaded && claim.snapshot.version == round }
    }
    claim.end()  // finishes the stream
    var received: [Int?] = []
    for await snapshot in updates { received.append(snapshot.version) }
    #expect(received.count <= 2, "the stream held \(received.count) snapshots")
    #expect(received.last == 101)
  }
}
