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

  // A view's attempt undone before its driver was attached (the second review of 750d81e): its
  // wait on the source was registered and is never withdrawn; the source's status observers hear
  // of `.loading` in between (user code), and undo the view's attempt there. The view re-reads the
  // source as the attempt ends, still old; then a write to the source supersedes the source's
  // attempt and hands its content to the undone attempt's wait, its one waiter. The view is idle
  // and loaded: it must be told, as a live view.

  /// A `map` over a loadable written through the engine's write event.
  @Test func aViewUndoneBeforeItsWaitIsWithdrawnHearsTheSourcesNextContent() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    async let first = source.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 1)
    let view = source.map { $0 * 10 }
    #expect(view.loadStatus == .loaded && view.content == 10)
    let gate = ControlledLoad<Void>()
    let top = AsyncLoadable<Int> {
      try await gate.operation()
      return try await view.fetch() + 1
    }
    let armed = Atomic<Bool>(false)
    let done = Atomic<Bool>(false)
    let viewStatusInTheWindow = Mutex<LoadStatus?>(nil)
    let observation = source.observeLoadStatus { status in
      guard status == .loading, armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      top.cancelLoad()  // undoes the view's refresh, which only `top` wanted
      viewStatusInTheWindow.withLock { $0 = view.loadStatus }
      source.perform(source.withState { $0.write(ContentBox(2)) }.effects)
      done.store(true, ordering: .releasing)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    armed.store(true, ordering: .releasing)
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.value }
    await eventually { done.load(ordering: .acquiring) }
    #expect(viewStatusInTheWindow.withLock { $0 } == .loaded)
    #expect(source.loadStatus == .loaded && source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == 20)
    #expect(view.needsSync == false)
    observation.cancel()
  }

  /// The same through the public API only: a `ContentLoader` key as the source, written with
  /// `set(_:version:for:)`.
  @Test func aViewOverAKeyUndoneBeforeItsWaitIsWithdrawnHearsTheKeysWrite() async throws {
    let keyed = KeyedSource()
    let loader = makeLoader(keyed)
    let source = loader.loadable(for: 1)
    let first = Task { try await source.fetch() }
    await keyed.waitForStarts(1)
    keyed.resolve(1, "one", version: 1)
    #expect(try await first.value == "one")
    let view = source.map { $0 + "!" }
    #expect(view.loadStatus == .loaded && view.content == "one!")
    let gate = ControlledLoad<Void>()
    let top = AsyncLoadable<String> {
      try await gate.operation()
      return try await view.fetch()
    }
    let armed = Atomic<Bool>(false)
    let done = Atomic<Bool>(false)
    let observation = source.observeLoadStatus { status in
      guard status == .loading, armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      top.cancelLoad()
      loader.set("two", version: 2, for: 1)
      done.store(true, ordering: .releasing)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    armed.store(true, ordering: .releasing)
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.value }
    await eventually { done.load(ordering: .acquiring) }
    #expect(source.content == "two")
    #expect(view.loadStatus == .loaded)
    #expect(view.content == "two!")
    #expect(view.needsSync == false)
    observation.cancel()
  }

  /// The same for a `zip` (its wait is a group's, `LoadWaiter.dependent`). Its other input's
  /// refresh is wanted by a plain caller, so that the zip's withdrawn wait on it changes nothing,
  /// and still runs when the view is read.
  @Test func aZipUndoneBeforeItsWaitIsWithdrawnHearsTheSourcesNextContent() async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    async let first = source.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 1)
    let otherControl = ControlledLoad<Int>()
    let other = otherControl.makeLoadable()
    async let otherFirst = other.fetch()
    try await otherControl.waitForStart(1)
    #expect(otherControl.resolve(7))
    #expect(try await otherFirst == 7)
    let view = zip([source, other])
    #expect(view.loadStatus == .loaded && view.content == [1, 7])
    let otherRefresh = Task { try await other.fetch() }
    try await otherControl.waitForStart(2)
    let gate = ControlledLoad<Void>()
    let top = AsyncLoadable<Int> {
      try await gate.operation()
      return try await view.fetch()[0]
    }
    let armed = Atomic<Bool>(false)
    let done = Atomic<Bool>(false)
    let observation = source.observeLoadStatus { status in
      guard status == .loading, armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      top.cancelLoad()
      source.perform(source.withState { $0.write(ContentBox(2)) }.effects)
      done.store(true, ordering: .releasing)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    armed.store(true, ordering: .releasing)
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.value }
    await eventually { done.load(ordering: .acquiring) }
    #expect(source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == [2, 7])
    #expect(otherControl.resolve(7))
    _ = try await otherRefresh.value
    observation.cancel()
  }
}
