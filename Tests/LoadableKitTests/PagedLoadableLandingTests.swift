@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

/// A cursor whose `==` calls a probe once, when armed, on a comparison of equal values: a
/// deterministic stand-in for another thread acting at the moment the paged loadable compares
/// cursors (it compares them in `PagedContent.insert`, after `pageLanded` checked the slot).
final class CursorProbe: Sendable {
  let action = Mutex<(@Sendable () -> Void)?>(nil)
  func arm(_ body: @escaping @Sendable () -> Void) { action.withLock { $0 = body } }
  func fire() { if let body = action.withLock({ a -> (@Sendable () -> Void)? in defer { a = nil }; return a }) { body() } }
}

struct ProbedCursor: Hashable, Sendable, CustomStringConvertible {
  var value: Int
  var probe: CursorProbe?
  static func == (lhs: ProbedCursor, rhs: ProbedCursor) -> Bool {
    let equal = lhs.value == rhs.value
    if equal { (lhs.probe ?? rhs.probe)?.fire() }
    return equal
  }
  func hash(into hasher: inout Hasher) { hasher.combine(value) }
  var description: String { "\(value)" }
}

@Suite("Paged loadable: landing, cancels and refreshes", .timeLimit(.minutes(1)))
struct PagedLoadableLandingTests {
  /// `cancelNextPage()`: "its callers throw CancellationError, ... the pages stay as they were";
  /// LoadingPages.md: "when it lands, the page is added *before* its callers resume, so a caller
  /// finds it in `items`". A cancel that comes after the page was added to the content but before
  /// `pageLanded` emptied the slot (here from a `withObservationTracking` onChange of `items`,
  /// which runs on the landing thread in that very window; any other thread can do the same)
  /// throws `CancellationError` at the caller while the page it cancelled stays added.
  @Test func aCancelAfterThePageWasAddedDoesNotFailItsCallerWithThePageKept() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    let window = Recorder<String>()
    withObservationTracking {
      _ = paged.items
    } onChange: {
      window.append("items:\(paged.items.count) next:\(paged.nextPageStatus)")
      paged.cancelNextPage()
    }
    #expect(source.control.resolve(page(1, next: 2)))
    let outcome: String
    do {
      try await next.outcome
      outcome = "returned"
    } catch {
      outcome = "threw \(type(of: error))"
    }
    #expect(window.values == ["items:4 next:loading"], "the cancel came while the page was added and nextPageStatus read loading")
    let agrees =
      (outcome == "returned" && paged.items == items(0...1))
      || (outcome == "threw CancellationError" && paged.items == items(0...0))
    #expect(agrees, "the caller \(outcome), and the items are \(paged.items)")
    #expect(paged.nextPageStatus == .notLoaded)
  }

  /// The same contradiction in the window before the insert: another thread's
  /// `cancelNextPage()` between `pageLanded`'s slot check and its insert. No user code runs there
  /// but a `Cursor`'s `==` (which the insert calls, outside the locks): used here only to place
  /// the cancel deterministically.
  @Test func aCancelBetweenTheSlotCheckAndTheInsertStillAddsThePage() async throws {
    let probe = CursorProbe()
    let control = ControlledLoad<Page<ProbedCursor, String>>()
    let paged = PagedLoadable<ProbedCursor, String> { _ in try await control.operation() }
    paged.sync()
    try await control.waitForStart(1)
    control.resolve(Page(items: ["0"], nextCursor: ProbedCursor(value: 1, probe: probe)))
    await eventually { paged.loadStatus == .loaded }
    let next = Task { try await paged.loadNextPage() }
    try await control.waitForStart(2)
    let cancelled = Recorder<String>()
    probe.arm {
      paged.cancelNextPage()
      cancelled.append("cancelled")
    }
    control.resolve(Page(items: ["1"], nextCursor: ProbedCursor(value: 2, probe: nil)))
    let outcome: String
    do {
      try await next.outcome
      outcome = "returned"
    } catch {
      outcome = "threw \(type(of: error))"
    }
    #expect(cancelled.values == ["cancelled"])
    let agrees = (outcome == "returned" && paged.items == ["0", "1"]) || (outcome == "threw CancellationError" && paged.items == ["0"])
    #expect(agrees, "the caller \(outcome), and the items are \(paged.items)")
  }

  /// `loadNextPage()`: "Cancelling the calling task makes this call throw `CancellationError` at
  /// once"; SPEC §1: "Cancelling the caller's task makes that caller throw CancellationError at
  /// once". A caller cancelled while it waits for the next page, whose page load a refresh then
  /// supersedes before the caller's task runs on, takes its own cancellation for the supersede
  /// and waits for the first page instead: when that has landed, the
  /// cancelled caller returns normally.
  @Test func aCallerCancelledWhileItWaitsForThePageThrowsThoughARefreshSupersededIt() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let executor = ManualTaskExecutor()
    let outcome = Recorder<String>()
    let caller = executor.spawn {
      do {
        try await paged.loadNextPage()
        outcome.append("returned")
      } catch {
        outcome.append("threw \(type(of: error))")
      }
    }
    _ = executor.runInOrder()
    try await source.control.waitForStart(2)
    await eventually { (paged.pageLoadable(toward: .next)?.waiterCount ?? 0) == 1 }
    caller.cancel()  // its wait ends with CancellationError; its task has not run on yet
    paged.sync()  // a refresh supersedes the page load
    try await source.control.waitForStart(3)
    #expect(source.control.resolve(page(0, next: 1, tag: "'")))
    await eventually { paged.loadStatus == .loaded }
    _ = executor.runInOrder()
    await eventually { outcome.count == 1 }
    #expect(outcome.values == ["threw CancellationError"], "a cancelled caller: \(outcome.values)")
  }

  /// LoadingPages.md, Refreshing: "A page that still lands after the refresh began — its request
  /// was in flight — is dropped", and `loadNextPage()`: "A refresh that starts while it loads
  /// supersedes it: the callers then wait for the fresh first page instead." The refresh
  /// supersedes the page loads only in its status hook, after the
  /// status went to loading and after the status handlers ran; a page load that ends in between
  /// (here: its task runs on a manual executor, driven from a status handler of the refresh —
  /// standing for the page's own thread) passes `pageLanded`'s checks (its slot, and the
  /// generation, which only the fresh first page changes), is added to the pages during the
  /// refresh, and its caller returns while the refresh runs.
  @Test func aPageThatEndsAfterTheRefreshBeganIsNotAddedAndItsCallerWaits() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let pageExecutor = ManualTaskExecutor()
    let statusAtReturn = Recorder<String>()
    // The caller and the page load's task run on `pageExecutor`, driven by the test.
    _ = pageExecutor.spawn {
      do {
        try await TaskLaunch.executor.withValue(pageExecutor) { try await paged.loadNextPage() }
        statusAtReturn.append("\(paged.loadStatus)")
      } catch {
        statusAtReturn.append("threw \(error)")
      }
    }
    // Run them until the page's request waits.
    await eventually {
      _ = pageExecutor.runInOrder()
      return source.control.startCount == 2
    }
    let duringRefresh = Recorder<String>()
    let once = Atomic<Bool>(false)
    let observation = paged.observeLoadStatus { status in
      guard status == .loading, !once.exchange(true, ordering: .relaxed) else { return }
      // The refresh began. The page's request returns now, and its task runs on.
      source.control.resolve(page(1, next: 2))
      _ = pageExecutor.runInOrder()
      duringRefresh.append("items:\(paged.items.count) status:\(paged.loadStatus)")
    }
    paged.sync()
    #expect(duringRefresh.values.count == 1)
    #expect(paged.loadStatus == .loading)
    #expect(paged.items == items(0...0), "a page added after the refresh began: \(paged.items) (\(duringRefresh.values))")
    try await source.control.waitForStart(3)  // the refresh's first page
    let beforeFreshPage = statusAtReturn.values
    #expect(source.control.resolve(page(0, next: 1, tag: "'")))
    await eventually { paged.loadStatus == .loaded }
    await eventually {
      _ = pageExecutor.runInOrder()
      return statusAtReturn.count == 1
    }
    #expect(beforeFreshPage.isEmpty, "the caller returned while the refresh ran: \(beforeFreshPage)")
    #expect(statusAtReturn.values == ["loaded"])
    #expect(paged.items == ["0'.a", "0'.b"])
    observation.cancel()
  }

  /// PagedContent: "The pages are contiguous: each one is the page after the one before it". A
  /// next page joins only if the last page held leads to it; a previous page was put in front
  /// whenever it was loaded with the dropped cursor, whatever its `nextCursor` said: when the
  /// source moved, a page that does not lead to the first page held was put in front of it. It
  /// fails with `sourceMoved` instead, like any failed page (the pages held stay, the error sticks
  /// until a retry, which asks the source again), rather than being dropped silently for a scroll
  /// view to ask for again and again.
  @Test func aPreviousPageThatDoesNotLeadToTheFirstPageHeldFailsWithSourceMoved() async throws {
    let source = PagedSource()
    let paged = try await source.scrolledPastTheBound()
    #expect(paged.items == items(1...2) && paged.hasPreviousPage)
    // The source moved: the first page now leads to page 5, not to page 1.
    let previous = Task { try await paged.loadPreviousPage() }
    try await source.control.waitForStart(4)
    #expect(source.control.resolve(page(0, next: 5, tag: "'")))
    await #expect(throws: LoadableError.sourceMoved) { try await previous.outcome }
    #expect(paged.items == items(1...2))
    #expect(paged.previousPageStatus == .failed)
    #expect(paged.previousPageError as? LoadableError == .sourceMoved)
    let content = try #require(paged.content)
    #expect(zip(content.pages, content.cursors.dropFirst()).allSatisfy { $0.nextCursor == $1 })
    // Sticky: no request until a retry.
    await #expect(throws: LoadableError.sourceMoved) { try await paged.loadPreviousPage() }
    #expect(source.control.startCount == 4)
    // A retry asks again; a page that leads to the first page held is put in front of it.
    let retry = Task { try await paged.retryPreviousPage() }
    try await source.control.waitForStart(5)
    #expect(source.control.resolve(page(0, next: 1)))
    try await retry.outcome
    #expect(paged.items == items(0...1))
    #expect(paged.previousPageStatus == .notLoaded)
  }
}
