@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A user value whose `deinit` calls back into the loadable that held it. Released under the
/// loadable's lock, it would trap with "Recursive call to lock Mutex".
final class CallsBack: Error, @unchecked Sendable {
  let tag: Int
  let onDeinit: @Sendable () -> Void
  init(_ tag: Int, onDeinit: @escaping @Sendable () -> Void) {
    self.tag = tag
    self.onDeinit = onDeinit
  }
  deinit { onDeinit() }
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
/// released after the lock, on every path that replaces or drops it.
@Suite("Re-entrant deinit", .timeLimit(.minutes(1)))
struct ReentrantDeinitTests {
  /// A loadable of `CallsBack` values whose deinits read the loadable's status.
  final class Fixture: Sendable {
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

    func settle(_ loadable: AsyncLoadable<CallsBack>, attempt: Int, with tag: Int) async {
      await control.waitForStart(attempt)
      control.resolve(tag)
    }
  }

  @Test func contentReplacedByARefresh() async throws {
    let fixture = Fixture()
    let loadable = fixture.makeLoadable()
    Task { await fixture.settle(loadable, attempt: 1, with: 1) }
    #expect(try await loadable.fetch().tag == 1)
    Task { await fixture.settle(loadable, attempt: 2, with: 2) }
    #expect(try await loadable.fetch().tag == 2)
    #expect(fixture.released.increment() >= 2)  // the first content went (and this read counts one)
  }

  @Test func errorReplacedByARetryAndByACancel() async throws {
    let fixture = Fixture()
    let loadable = fixture.makeLoadable()
    let first = Task { try await loadable.load() }
    await fixture.settle(loadable, attempt: 1, with: -1)
    await #expect(throws: CallsBack.self) { try await first.value }
    // Retry fails again: the first error is replaced.
    let second = Task { try await loadable.retryLoad() }
    await fixture.settle(loadable, attempt: 2, with: -2)
    await #expect(throws: CallsBack.self) { try await second.value }
    // A retry that is cancelled: the second error is replaced by CancellationError.
    let third = Task { try await loadable.retryLoad() }
    await fixture.control.waitForStart(3)
    loadable.cancelLoad()
    await #expect(throws: CancellationError.self) { try await third.value }
    await eventually { fixture.released.increment() > 4 }
  }

  @Test func aCascadeCancelRestoresWithoutReleasingUnderTheLock() async throws {
    let fixture = Fixture()
    let dependency = fixture.makeLoadable()
    async let first = dependency.fetch()
    await fixture.settle(dependency, attempt: 1, with: 1)
    _ = try await first.tag
    let dependent = dependency.asyncMap { $0.tag }
    // The dependent refreshes the dependency; cancelling the dependent puts the dependency back.
    let refreshing = Task { try await dependent.fetch() }
    await fixture.control.waitForStart(2)
    dependent.cancelLoad()
    await #expect(throws: CancellationError.self) { try await refreshing.value }
    await eventually { dependency.loadStatus == .loaded }
    #expect(dependency.content?.tag == 1)
  }

  @Test func aLiveMapReplacesItsContent() async throws {
    let fixture = Fixture()
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
    await fixture.control.waitForStart(1)
    fixture.control.resolve(1)
    try await first
    async let refresh = source.fetch()
    await fixture.control.waitForStart(2)
    fixture.control.resolve(2)
    _ = try await refresh
    await eventually { view.content?.tag == 2 }
    #expect(released.increment() >= 2)
    // The view's own attempt, which runs without a task, replaces its content too: the content
    // it replaced is released, and its deinit reads the view's status.
    let before = released.count
    async let fetched = view.fetch()
    await fixture.control.waitForStart(3)
    fixture.control.resolve(3)
    #expect(try await fetched.tag == 3)
    await eventually { released.count > before }
  }

  @Test func handlersAreReleasedAfterTheLock() async throws {
    let fixture = Fixture()
    let loadable = fixture.makeLoadable()
    let probe = fixture.value(0)
    let observation = loadable.observeLoadStatus { [probe] _ in _ = probe.tag }
    loadable.load { [probe] _ in _ = probe.tag }
    await fixture.settle(loadable, attempt: 1, with: 1)
    await eventually { loadable.loadStatus == .loaded }
    observation.cancel()
    _ = consume probe
    await eventually { fixture.released.increment() > 2 }
  }

  @Test func theHolderReleasesItsContentAfterItsLock() async throws {
    let fixture = Fixture()
    var loadable: AsyncLoadable<CallsBack>? = fixture.makeLoadable()
    let held = loadable!
    let first = Task { try await held.fetch().tag }
    await fixture.settle(held, attempt: 1, with: 1)
    _ = try await first.value
    _ = consume held
    loadable = nil
    #expect(fixture.released.increment() >= 2)
  }
}
