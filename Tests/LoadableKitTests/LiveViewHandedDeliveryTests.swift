@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 28: a view (`map`, `zip`) whose running attempt is its source's attempt's one waiter is
// handed the source's new content by the resume phase, and is not also told of it as a live view
// (`AsyncLoadable.notifyContentListeners(except:)`). These pin what must still be told.

/// A status observer on `source` whose `body` runs once: the first time the source reports
/// `status` after ``arm()`` — user code at that point of the source's work.
final class StatusWindow: Sendable {
  private let armed = Atomic<Bool>(false)
  private let began = Atomic<Bool>(false)
  private let done = Atomic<Bool>(false)
  private let observation = Mutex<LoadObservation?>(nil)

  init<S: Sendable>(on source: AsyncLoadable<S>, hearing status: LoadStatus, _ body: @escaping @Sendable () -> Void) {
    // Holds the window until `cancel()`.
    let observation = source.observeLoadStatus { heard in
      guard heard == status, self.armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      self.began.store(true, ordering: .releasing)
      body()
      self.done.store(true, ordering: .releasing)
    }
    self.observation.withLock { $0 = observation }
  }

  func arm() { armed.store(true, ordering: .releasing) }

  /// Waits, bounded, until `body` has returned, when it has begun; fails the test when it never
  /// began, at once: a window that never opens (the bug a test looks for) must not keep a thread of
  /// the pool yielding until the bound.
  func waitUntilRun(sourceLocation: SourceLocation = #_sourceLocation) async {
    guard began.load(ordering: .acquiring) else {
      Issue.record("the window never opened", sourceLocation: sourceLocation)
      return
    }
    await eventually(200_000, timeout: .seconds(20), { done.load(ordering: .acquiring) }, sourceLocation: sourceLocation)
  }

  func cancel() { observation.withLock { $0 }?.cancel() }
}

@Suite("A view handed its source's content", .timeLimit(.minutes(1)))
struct LiveViewHandedDeliveryTests {

  /// A view over a source: a `map` (its attempt waits with `LoadWaiter.source`) or a `zip` with an
  /// input already loaded (a group's wait, `LoadWaiter.dependent`), both of `[Int]`.
  enum ViewShape: String, CaseIterable, Sendable {
    case map, zip

    func view(over source: AsyncLoadable<Int>) async throws -> AsyncLoadable<[Int]> {
      switch self {
      case .map: return source.map { [$0 * 10] }
      case .zip:
        let fixed = AsyncLoadable<Int> { 7 }
        try await fixed.load()
        return LoadableKit.zip([source, fixed])
      }
    }

    /// The view's content when the source's is `value`.
    func content(_ value: Int) -> [Int] { self == .map ? [value * 10] : [value, 7] }
  }

  /// Two views over one source; one view's refresh loads the source, whose attempt has that view's
  /// wait as its one waiter. The other view, loaded and idle, is a live view: it must hear the
  /// new content.
  @Test(arguments: ViewShape.allCases)
  func theSourcesOtherViewHearsTheContentOneViewWasHanded(_ shape: ViewShape) async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let other = source.map { $0 + 1 }
    async let first = other.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == 2)
    let refreshed = try await shape.view(over: source)
    #expect(refreshed.loadStatus == .loaded && refreshed.content == shape.content(1))

    async let second = refreshed.fetch()
    try await control.waitForStart(2)
    #expect(control.resolve(2))
    #expect(try await second == shape.content(2))
    #expect(other.loadStatus == .loaded)
    #expect(other.content == 3)
  }

  /// A view's refresh, made for a view over it, waits for its source's refresh alone. The
  /// source's attempt ends, and in the moment before it hands the view its content (the source's
  /// status observers run then), the view over it cancels its load: the view's attempt, which
  /// nobody else wants, is undone and the view put back as it was, loaded with the old content
  /// (SPEC §2). It must then show the source's new content all the same, as a live view does when
  /// its source changes while it is idle.
  @Test(arguments: ViewShape.allCases)
  func aViewWhoseRefreshIsUndoneBeforeItIsHandedTheContentStillShowsIt(_ shape: ViewShape) async throws {
    let control = ControlledLoad<Int>()
    let source = control.makeLoadable()
    let view = try await shape.view(over: source)
    let top = view.map { $0 }
    async let first = top.fetch()
    try await control.waitForStart(1)
    #expect(control.resolve(1))
    #expect(try await first == shape.content(1))

    let seenInTheWindow = Mutex<LoadStatus?>(nil)
    let window = StatusWindow(on: source, hearing: .loaded) {
      // The source's attempt has ended and its observers hear of it first: the view's refresh is
      // still waiting for the content.
      seenInTheWindow.withLock { $0 = view.loadStatus }
      top.cancelLoad()
    }
    let refresh = Task { try await top.fetch() }
    try await control.waitForStart(2)
    window.arm()
    #expect(control.resolve(2))
    await #expect(throws: CancellationError.self) { try await refresh.outcome }
    await window.waitUntilRun()
    #expect(seenInTheWindow.withLock { $0 } == .loading)
    #expect(source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == shape.content(2))
    window.cancel()
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
    let viewStatusInTheWindow = Mutex<LoadStatus?>(nil)
    let window = StatusWindow(on: source, hearing: .loading) {
      top.cancelLoad()  // undoes the view's refresh, which only `top` wanted
      viewStatusInTheWindow.withLock { $0 = view.loadStatus }
      source.perform(source.withState { $0.write(ContentBox(2)) }.effects)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    window.arm()
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.outcome }
    await window.waitUntilRun()
    #expect(viewStatusInTheWindow.withLock { $0 } == .loaded)
    #expect(source.loadStatus == .loaded && source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == 20)
    #expect(view.needsSync == false)
    window.cancel()
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
    let window = StatusWindow(on: source, hearing: .loading) {
      top.cancelLoad()
      loader.set("two", version: 2, for: 1)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    window.arm()
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.outcome }
    await window.waitUntilRun()
    #expect(source.content == "two")
    #expect(view.loadStatus == .loaded)
    #expect(view.content == "two!")
    #expect(view.needsSync == false)
    window.cancel()
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
    let window = StatusWindow(on: source, hearing: .loading) {
      top.cancelLoad()
      source.perform(source.withState { $0.write(ContentBox(2)) }.effects)
    }
    let run = Task { try await top.fetch() }
    try await gate.waitForStart(1)
    window.arm()
    #expect(gate.resolve(()))
    await #expect(throws: CancellationError.self) { try await run.outcome }
    await window.waitUntilRun()
    #expect(source.content == 2)
    #expect(view.loadStatus == .loaded)
    #expect(view.content == [2, 7])
    #expect(otherControl.resolve(7))
    _ = try await otherRefresh.outcome
    window.cancel()
  }
}
