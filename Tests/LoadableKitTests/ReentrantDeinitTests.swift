@testable import LoadableKit
import LoadableKitTesting
import Foundation
import Synchronization
import Testing

/// A user value — content, an error, a key or a version (its tag orders and identifies it) — whose
/// `deinit` calls back into the loadable or loader that held it. Released under their lock, it
/// would trap with "Recursive call to lock Mutex".
final class CallsBack: Error, Hashable, Comparable, @unchecked Sendable {
  let tag: Int
  let onDeinit: @Sendable () -> Void
  init(_ tag: Int, onDeinit: @escaping @Sendable () -> Void) {
    self.tag = tag
    self.onDeinit = onDeinit
  }
  deinit { onDeinit() }
  static func < (lhs: CallsBack, rhs: CallsBack) -> Bool { lhs.tag < rhs.tag }
  static func == (lhs: CallsBack, rhs: CallsBack) -> Bool { lhs.tag == rhs.tag }
  func hash(into hasher: inout Hasher) { hasher.combine(tag) }
}

/// A weak reference a `deinit` can read from any thread.
final class WeakHolder<Object: AnyObject>: Sendable {
  private let storage = Mutex<WeakBox?>(nil)
  private final class WeakBox: @unchecked Sendable { weak var object: Object? }
  func set(_ object: Object) {
    let box = WeakBox()
    box.object = object
    storage.withLock(owner: self) { $0 = box }
  }
  var object: Object? { storage.withLock(owner: self) { $0?.object } }
}

/// Every user value a loadable holds — content, error, observer and completion handlers — is
/// released after the lock, on every path that replaces or drops it. Each value's `deinit` reads
/// the loadable, which takes its lock: released under the lock it stops the process with
/// "Recursive call to lock Mutex", so each scenario runs in an exit test (as the Jobs ones do),
/// and a failure is reported as that scenario's, not as the end of the whole run.
@Suite("Re-entrant deinit", .serialized, .timeLimit(.minutes(2)))
struct ReentrantDeinitTests {
  @Test(arguments: EngineReleasePath.allCases)
  func userValuesAreReleasedAfterTheLock(_ path: EngineReleasePath) async {
    await #expect(processExitsWith: .success) { [path] in
      await path.run()
    }
  }
}

/// A loadable of `CallsBack` values whose deinits read the loadable's status.
final class ReleaseFixture: Sendable {
  let holder = WeakHolder<AsyncLoadable<CallsBack>>()
  let released = Counter()
  let control = ControlledLoad<Int>()

  func value(_ tag: Int) -> CallsBack {
    CallsBack(tag) { [holder, released] in
      _ = holder.object?.loadStatus
      _ = holder.object?.snapshot
      released.increment()
    }
  }

  func makeLoadable() -> AsyncLoadable<CallsBack> {
    let loadable = AsyncLoadable<CallsBack> { [self] in
      let tag = try await control.operation()
      if tag < 0 { throw value(tag) }
      return value(tag)
    }
    holder.set(loadable)
    return loadable
  }

  func settle(attempt: Int, with tag: Int) async throws {
    try await control.waitForStart(attempt)
    control.resolve(tag)
  }
}

/// The paths on which an `AsyncLoadable` lets go of a value its user gave it. Each runs in a
/// child process and exits with 2, saying what it missed, when a value it must have released is
/// still held; a value released under the lock traps before that.
enum EngineReleasePath: String, Codable, Sendable, CaseIterable {
  /// A refresh replaces the content.
  case contentReplacedByARefresh
  /// A retry replaces the error; a cancelled retry replaces it with `CancellationError`.
  case errorReplacedByARetryAndByACancel
  /// A cascade cancel puts a dependency back as it was, dropping what its attempt held.
  case aCascadeCancelRestores
  /// A live `map` recomputes its content; its own attempt replaces it too.
  case aLiveMapReplacesItsContent
  /// An observer ends and a completion handler runs: both closures go.
  case handlersAreReleased
  /// The last reference to the loadable goes: its content goes with it.
  case theHolderReleasesItsContent
  /// A refresh supersedes a key's running load whose work ignores cancellation: the value that
  /// work returns at last is dropped (SPEC §5), after the loader's and the key's locks.
  case aSupersededKeysValueIsDropped
  /// A key's interim values are let go of when a newer one, a local write or the load's result
  /// takes their place, after the loader's and the key's locks.
  case interimValuesAreReplaced
  /// The cost limit evicts several idle keys in one step, when a value that costs the whole limit
  /// lands: every evicted key, and its value, goes after the loader's lock (the loader's effects
  /// keep the first objects they let go of inline, the rest in a list: each place is taken here).
  case keysEvictedTogether
  /// A key's versions (a user type) are let go of when later loads, a local write and a removal
  /// replace them, after the key's locks (its version table keeps its first slot inline, and
  /// moves the next one into it).
  case aKeysVersionsAreReplaced

  func run() async {
    do {
      try await body()
    } catch {
      print("\(self): \(error)")
      exit(3)
    }
  }

  /// Yields until `condition` holds; exits with 2 after a bounded number of yields.
  private func expect(_ what: String, _ condition: () -> Bool) async {
    for _ in 0..<200_000 {
      if condition() { return }
      await Task.yield()
    }
    print("\(self): \(what)")
    exit(2)
  }

  private func body() async throws {
    let fixture = ReleaseFixture()
    switch self {
    case .contentReplacedByARefresh:
      let loadable = fixture.makeLoadable()
      Task { try await fixture.settle(attempt: 1, with: 1) }
      guard try await loadable.fetch().tag == 1 else { exit(4) }
      Task { try await fixture.settle(attempt: 2, with: 2) }
      guard try await loadable.fetch().tag == 2 else { exit(4) }
      await expect("the first content was not released") { fixture.released.count == 1 }

    case .errorReplacedByARetryAndByACancel:
      let loadable = fixture.makeLoadable()
      // Each caller's task is dropped once it threw: its result holds the error too.
      do {
        let first = Task { try await loadable.load() }
        try await fixture.settle(attempt: 1, with: -1)
        _ = await first.result
      }
      do {
        let second = Task { try await loadable.retryLoad() }
        try await fixture.settle(attempt: 2, with: -2)
        _ = await second.result
      }
      await expect("the first error was not released when the retry replaced it") { fixture.released.count == 1 }
      do {
        let third = Task { try await loadable.retryLoad() }
        try await fixture.control.waitForStart(3)
        loadable.cancelLoad()
        _ = await third.result
      }
      await expect("the second error was not released when the cancel replaced it") { fixture.released.count == 2 }

    case .aCascadeCancelRestores:
      let dependency = fixture.makeLoadable()
      async let first = dependency.fetch()
      try await fixture.settle(attempt: 1, with: 1)
      _ = try await first.tag
      let dependent = dependency.asyncMap { $0.tag }
      let refreshing = Task { try await dependent.fetch() }
      try await fixture.control.waitForStart(2)
      dependent.cancelLoad()
      _ = await refreshing.result
      await expect("the dependency was not put back") { dependency.loadStatus == .loaded }
      guard dependency.content?.tag == 1 else { exit(4) }

    case .aLiveMapReplacesItsContent:
      let source = AsyncLoadable<Int> { try await fixture.control.operation() }
      let views = WeakHolder<AsyncLoadable<CallsBack>>()
      let released = Counter()
      let view = source.map { tag in
        CallsBack(tag) { [views] in
          _ = views.object?.loadStatus
          released.increment()
        }
      }
      views.set(view)
      async let first: Void = view.load()
      try await fixture.control.waitForStart(1)
      fixture.control.resolve(1)
      try await first
      async let refresh = source.fetch()
      try await fixture.control.waitForStart(2)
      fixture.control.resolve(2)
      _ = try await refresh
      await expect("the view did not recompute") { view.content?.tag == 2 }
      await expect("the view's first content was not released") { released.count == 1 }
      // The view's own attempt, which runs without a task, replaces its content too.
      async let fetched = view.fetch()
      try await fixture.control.waitForStart(3)
      fixture.control.resolve(3)
      guard try await fetched.tag == 3 else { exit(4) }
      await expect("the content the view's own attempt replaced was not released") { released.count == 2 }

    case .handlersAreReleased:
      // One probe a closure, so that each closure holds the last reference to its own.
      let loadable = fixture.makeLoadable()
      let observation: LoadObservation
      do {
        let observerProbe = fixture.value(0)
        let completionProbe = fixture.value(0)
        observation = loadable.observeLoadStatus { [observerProbe] _ in _ = observerProbe.tag }
        loadable.load { [completionProbe] _ in _ = completionProbe.tag }
      }
      try await fixture.settle(attempt: 1, with: 1)
      await expect("the completion handler's closure was not released") { fixture.released.count == 1 }
      observation.cancel()
      await expect("the observer's closure was not released") { fixture.released.count == 2 }

    case .theHolderReleasesItsContent:
      do {
        let loadable = fixture.makeLoadable()
        let first = Task { try await loadable.fetch().tag }
        try await fixture.settle(attempt: 1, with: 1)
        _ = try await first.value
      }
      await expect("the content outlived its loadable") { fixture.released.count == 1 }

    case .aSupersededKeysValueIsDropped:
      typealias Thumbnails = ContentLoader<Int, CallsBack, Int>
      let loaders = WeakHolder<Thumbnails>()
      let released = Counter()
      let control = ControlledLoad<Int>(ignoresCancellation: true)
      let loader = Thumbnails(idleTimeout: nil) { key in
        let tag = try await control.operation()
        // Its deinit reads the loader and the key's loadable, which take their locks.
        let value = CallsBack(tag) { [loaders] in
          _ = loaders.object?.snapshot(for: key)
          _ = loaders.object?.loadable(for: key).loadStatus
          released.increment()
        }
        return (value, tag)
      }
      loaders.set(loader)
      let claim = loader.begin(1)
      try await control.waitForStart(1)
      loader.refresh(1)
      try await control.waitForStart(2)
      control.resolve(99)  // the superseded work returns at last, with a newer version: dropped
      await expect("the superseded load's value was not released") { released.count == 1 }
      control.resolve(2)
      await expect("the fresh value did not land") { claim.snapshot.value?.tag == 2 }
      claim.end()

    case .keysEvictedTogether:
      typealias Thumbnails = ContentLoader<Int, CallsBack, Int>
      let loaders = WeakHolder<Thumbnails>()
      let released = Counter()
      let loader = Thumbnails(idleTimeout: nil, cost: { $0.tag == 0 ? 5 : 1 }, totalCostLimit: 5) { key in
        // Its deinit reads the loader, which takes its lock.
        let value = CallsBack(key) { [loaders] in
          _ = loaders.object?.count
          released.increment()
        }
        return (value, 1)
      }
      loaders.set(loader)
      for key in 1...5 {
        let claim = loader.begin(key)
        await expect("key \(key) did not load") { claim.snapshot.status == .loaded }
        claim.end()
      }
      guard loader.count == 5 else { exit(4) }  // idle, and within the limit
      // Key 0 costs the whole limit: once it loaded, the five idle keys are evicted at once.
      let big = loader.begin(0)
      await expect("key 0 did not load") { big.snapshot.status == .loaded }
      await expect("the evicted keys' values were not released") { released.count == 5 }
      guard loader.count == 1 else { exit(4) }
      big.end()

    case .interimValuesAreReplaced:
      typealias Thumbnails = ContentLoader<Int, CallsBack, Int>
      let loaders = WeakHolder<Thumbnails>()
      let released = Counter()
      let control = ControlledLoad<Int>()
      // Its deinit reads the loader and the key's loadable, which take their locks.
      let value: @Sendable (Int, Int) -> CallsBack = { key, tag in
        CallsBack(tag) { [loaders] in
          _ = loaders.object?.snapshot(for: key)
          _ = loaders.object?.loadable(for: key).loadStatus
          released.increment()
        }
      }
      let loader = Thumbnails(
        idleTimeout: nil,
        load: { key, interim in
          interim.deliver(value(key, 1), version: 1)
          interim.deliver(value(key, 2), version: 2)  // takes the place of 1
          let tag = try await control.operation()
          return (value(key, tag), tag)
        })
      loaders.set(loader)
      let written = loader.begin(1)
      try await control.waitForStart(1)
      await expect("an interim value a newer one replaced was not released") { released.count == 1 }
      loader.set(value(1, 3), version: 3, for: 1)  // takes the place of 2
      await expect("an interim value a local write replaced was not released") { released.count == 2 }
      let loaded = loader.begin(2)
      try await control.waitForStart(2)
      await expect("key 2's first interim value was not released") { released.count == 3 }
      control.resolve(4)  // the result takes the place of key 2's interim value 2
      await expect("the result did not land") { loaded.snapshot.value?.tag == 4 }
      await expect("an interim value the result replaced was not released") { released.count == 4 }
      written.end()
      loaded.end()
    case .aKeysVersionsAreReplaced:
      typealias Rows = ContentLoader<Int, Int, CallsBack>
      let loaders = WeakHolder<Rows>()
      let released = Counter()
      // Its deinit reads the loader and the key's loadable, which take their locks.
      let version: @Sendable (Int) -> CallsBack = { number in
        CallsBack(number) { [loaders] in
          _ = loaders.object?.snapshot(for: 1)
          _ = loaders.object?.loadable(for: 1).loadStatus
          released.increment()
        }
      }
      let loads = Counter()
      let loader = Rows(idleTimeout: nil, load: { _ in
        let number = loads.increment()
        return (number, version(number))
      })
      loaders.set(loader)
      let loadable = loader.loadable(for: 1)
      try await loadable.load()  // version 1, the table's first slot
      _ = try await loadable.fetch()  // version 2 beside it
      _ = try await loadable.fetch()  // version 3: 1 goes, 2 moves into the first slot
      await expect("the version a later load replaced was not released") { released.count == 1 }
      loader.set(10, version: version(10), for: 1)  // 2 goes
      await expect("the version a local write replaced was not released") { released.count == 2 }
      loader.remove(1)  // 3 and 10 go
      await expect("the versions a removal dropped were not released") { released.count == 4 }
    }
  }
}
