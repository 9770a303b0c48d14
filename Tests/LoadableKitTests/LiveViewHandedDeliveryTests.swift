@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 28: a `map` whose attempt is its source's attempt's one waiter is handed the source's new
// content by the resume phase, and is not also told of it as a live view
// (`AsyncLoadable.notifyContentListeners(except:)`). These pin what must still be told.

@Suite("A view handed its source's content", .timeLimit(.minutes(1)))
struct LiveViewHandedDeliveryTests {

  /// Two views over one source; one view's refresh loads the source, whose attempt has that view's
  /// wait as its one waiter. The other view, loaded and idle, is a live view: it must hear the
  /// new content.
  @Test func theSourcesOtherViewHearsTheContentOneViewWasHanded() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let other = source.map { $0 + 1 }
    async let first = other.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 2)
    let refreshed = source.map { $0 * 10 }
    #expect(refreshed.loadStatus == .loaded && refreshed.content == 10)

    async let second = refreshed.fetch()
    try await control.waitForStart(2)
    #expect(control.resolve(2))
    #expect(try await second == 20)
    #expect(other.loadStatus == .loaded)
    #expect(other.content == 3)
  }

  /// A view's refresh, made for a view over it, waits for its source's refresh alone. The
  /// source's attempt ends, and in the moment before it hands the view its content (the source's
  /// status observers run then), the view over it cancels its load: the view's attempt, which
  /// nobody else wants, is undone and the view put back as it was, loaded with the old content
  /// (SPEC §2). It must then show the source's new content all the same, as a live view does when
  /// its source changes while it is idle.
  @Test func aViewWhoseRefreshIsUndoneBeforeItIsHandedTheContentStillShowsIt() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let view = source.map { $0 * 10 }
    let top = view.map { $0 + 1 }
    async let first = top.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 11)

    let armed = Atomic<Bool>(false)
    let seenInTheWindow = Mutex<LoadStatus?>(nil)
    let observation = source.observeLoadStatus { status in
      guard status == .loaded, armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      // The source's attempt has ended and its observers hear of it first: the view's refresh is
      // still waiting for the content.
      seenInTheWindow.withLock { $0 = view.loadStatus }
      top.cancelLoad()
    }
    let refresh = Task { try await top.fetch() }
    try await control.waitForStart(2)
    armed.store(true, ordering: .releasing)
    #expect(control.resolve(2))
    await #expect(throws: CancellationError.self) { try await refresh.value }
    #expect(seenInTheWindow.withLock { $0 } == .loading)
    #expect(source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == 20)
    observation.cancel()
  }

  // The same for a `zip`, whose attempt waits for its inputs as a group (`LoadWaiter.dependent`).

  @Test func theSourcesOtherViewHearsTheContentAZipWasHanded() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let fixed = AsyncLoadable<Int> { 7 }
    try await fixed.load()
    let other = source.map { $0 + 1 }
    async let first = other.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 2)
    let refreshed = zip([source, fixed])
    #expect(refreshed.loadStatus == .loaded && refreshed.content == [1, 7])

    async let second = refreshed.fetch()
    try await control.waitForStart(2)
    #expect(control.resolve(2))
    #expect(try await second == [2, 7])
    #expect(other.loadStatus == .loaded)
    #expect(other.content == 3)
  }

  @Test func aZipWhoseRefreshIsUndoneBeforeItIsHandedTheContentStillShowsIt() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let fixed = AsyncLoadable<Int> { 7 }
    let view = zip([source, fixed])
    let top = view.map { $0[0] + $0[1] }
    async let first = top.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 8)

    let armed = Atomic<Bool>(false)
    let seenInTheWindow = Mutex<LoadStatus?>(nil)
    let observation = source.observeLoadStatus { status in
      guard status == .loaded, armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      seenInTheWindow.withLock { $0 = view.loadStatus }
      top.cancelLoad()
    }
    let refresh = Task { try await top.fetch() }
    try await control.waitForStart(2)
    armed.store(true, ordering: .releasing)
    #expect(control.resolve(2))
    await #expect(throws: CancellationError.self) { try await refresh.value }
    #expect(seenInTheWindow.withLock { $0 } == .loading)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == [2, 7])
    observation.cancel()
  }
}
