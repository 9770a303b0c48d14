@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

/// A paged source the test drives: page `k` (the first page for the cursor `nil`) holds
/// `"k.a"` and `"k.b"`; each request records its cursor and waits for the test.
final class PagedSource: Sendable {
  let control: ControlledLoad<Page<Int, String>>
  let requests = Recorder<Int?>()

  init(ignoresCancellation: Bool = false) {
    control = ControlledLoad(ignoresCancellation: ignoresCancellation)
  }

  func makeLoadable(name: String = "paged", maximumPages: Int? = nil) -> PagedLoadable<Int, String> {
    PagedLoadable(name: name, maximumPages: maximumPages) { [self] cursor in
      requests.append(cursor)
      return try await control.operation()
    }
  }

  /// A paged loadable with its first page loaded (`0.a`, `0.b`, next cursor 1).
  func loadedFirstPage(maximumPages: Int? = nil) async throws -> PagedLoadable<Int, String> {
    let paged = makeLoadable(maximumPages: maximumPages)
    paged.sync()
    try await control.waitForStart(1)
    control.resolve(page(0, next: 1))
    await eventually { paged.loadStatus == .loaded }
    return paged
  }

  /// A paged loadable bounded to two pages, scrolled to pages 1 and 2: page 0 was dropped (a
  /// previous page to load again), and the next cursor is 3.
  func scrolledPastTheBound() async throws -> PagedLoadable<Int, String> {
    let paged = try await loadedFirstPage(maximumPages: 2)
    try await loadNext(paged, resolving: 1, next: 2)
    try await loadNext(paged, resolving: 2, next: 3)
    return paged
  }

  /// Loads the next page of `paged`, resolving it with page `number`.
  func loadNext(_ paged: PagedLoadable<Int, String>, resolving number: Int, next: Int?) async throws {
    let started = control.startCount
    let task = Task { try await paged.loadNextPage() }
    try await control.waitForStart(started + 1)
    control.resolve(page(number, next: next))
    try await task.outcome
  }
}

func page(_ number: Int, next: Int?, tag: String = "") -> Page<Int, String> {
  Page(items: ["\(number)\(tag).a", "\(number)\(tag).b"], nextCursor: next)
}

func items(_ numbers: ClosedRange<Int>) -> [String] {
  numbers.flatMap { ["\($0).a", "\($0).b"] }
}

extension PagedSource {
  /// A caller of `paged.loadNextPage()` on `executor`, started until its request (the source's
  /// second) waits: how it ended is recorded, "returned status:… items:…" or "threw <type>".
  func nextPageCaller(of paged: PagedLoadable<Int, String>, on executor: ManualTaskExecutor) async throws -> Recorder<String> {
    let outcome = Recorder<String>()
    _ = executor.spawn {
      do {
        try await paged.loadNextPage()
        outcome.append("returned status:\(paged.loadStatus) items:\(paged.items.count)")
      } catch {
        outcome.append("threw \(type(of: error))")
      }
    }
    _ = executor.runInOrder()
    try await control.waitForStart(2)
    return outcome
  }

  /// Calls `body` once, from a page observer, in the moment a next page load has loaded and its
  /// page is not added yet (its status handlers run first): where `nextPageStatus` reads loading.
  func onceTheNextPageLandsLater(
    _ paged: PagedLoadable<Int, String>, _ body: @escaping @Sendable (PagedSnapshot<Int, String>) -> Void
  ) -> LoadObservation {
    let once = Atomic<Bool>(false)
    return paged.observePages { snapshot in
      guard paged.pageLoadable(toward: .next)?.loadStatus == .loaded, !once.exchange(true, ordering: .relaxed) else { return }
      body(snapshot)
    }
  }
}

@Suite("PagedLoadable", .timeLimit(.minutes(1)))
struct PagedLoadableTests {
  @Test func nextPageCallersShareOneRequest() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let callers = 100
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<callers {
        group.addTask { try await paged.loadNextPage() }
      }
      await eventually { (paged.pageLoadable(toward: .next)?.waiterCount ?? 0) == callers }
      // Every caller has joined the attempt; its task may not have asked for the page yet.
      try await source.control.waitForStart(2)
      #expect(source.control.startCount == 2, "one request for the next page")
      #expect(paged.items == items(0...0), "the pages so far stay readable")
      #expect(paged.nextPageStatus == .loading)
      #expect(paged.loadStatus == .loaded)
      #expect(source.control.resolve(page(1, next: 2)))
      try await group.waitForAll()
    }
    #expect(paged.items == items(0...1))
    #expect(source.requests.values == [nil, 1])
    #expect(paged.nextPageStatus == .notLoaded)
    #expect(paged.hasNextPage)
  }

  @Test func aFailedMiddlePageKeepsThePagesAndSticksUntilItsRetry() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    try await source.loadNext(paged, resolving: 1, next: 2)

    let failing = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(3)
    source.control.fail(Boom(code: 2))
    await #expect(throws: Boom(code: 2)) { try await failing.outcome }
    #expect(paged.items == items(0...1), "every loaded page is kept")
    #expect(paged.loadStatus == .loaded, "only the next page failed")
    #expect(paged.nextPageStatus == .failed)
    #expect(paged.nextPageError as? Boom == Boom(code: 2))

    // Sticky: loading again throws the stored error without a request.
    await #expect(throws: Boom(code: 2)) { try await paged.loadNextPage() }
    #expect(source.control.startCount == 3)

    let retry = Task { try await paged.retryNextPage() }
    try await source.control.waitForStart(4)
    #expect(paged.nextPageStatus == .loading)
    source.control.resolve(page(2, next: nil))
    try await retry.outcome
    #expect(paged.items == items(0...2))
    #expect(source.requests.values == [nil, 1, 2, 2])
    #expect(!paged.hasNextPage)
    #expect(paged.nextPageStatus == .notLoaded && paged.nextPageError == nil)
    try await paged.loadNextPage()  // the last page: nothing to load
    #expect(source.control.startCount == 4)
  }

  @Test func cancellingTheNextPageLeavesThePagesAsTheyWere() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let versionBefore = paged.withState { $0.contentVersion }
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    paged.cancelNextPage()
    await #expect(throws: CancellationError.self) { try await next.outcome }
    #expect(source.control.cancelledCount == 1, "the request's task was cancelled")
    #expect(paged.items == items(0...0))
    #expect(paged.withState { $0.contentVersion } == versionBefore)
    #expect(paged.loadStatus == .loaded)
    #expect(paged.nextPageStatus == .notLoaded, "a cancel is not a failure to retry")

    // The next call starts a fresh request for the same page.
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(paged.items == items(0...1))
    #expect(source.requests.values == [nil, 1, 1])
  }

  @Test func aRefreshSupersedesTheNextPageAndReplacesThePagesWhenItLands() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    try await source.loadNext(paged, resolving: 1, next: 2)
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(3)
    // Its work may start before the launching caller stores the task; a cancel before that
    // reaches the task only when it is stored. "At once" is about a stored task.
    await eventually { paged.nextPageLoadableForTesting?.runnerIsAttachedForTesting == true }

    paged.sync()  // the refresh
    #expect(source.control.cancelledCount == 1, "the next page's request was cancelled at once")
    #expect(paged.nextPageStatus == .notLoaded)
    try await source.control.waitForStart(4)
    #expect(paged.loadStatus == .loading)
    #expect(paged.items == items(0...1), "the old pages stay until the fresh first page lands")
    // The next page's caller now waits for the fresh first page.
    await eventually { paged.waiterCount == 1 }

    source.control.resolve(page(0, next: 1, tag: "'"))
    try await next.outcome
    #expect(paged.loadStatus == .loaded)
    #expect(paged.items == ["0'.a", "0'.b"], "the fresh first page replaced every page")
    #expect(source.requests.values == [nil, 1, 2, nil])
    #expect(paged.hasNextPage && !paged.hasPreviousPage)
  }

  @Test func thePageBoundDropsTheFarEndWhichLoadsAgainFromItsCursor() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage(maximumPages: 2)
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(!paged.hasPreviousPage)
    try await source.loadNext(paged, resolving: 2, next: 3)
    #expect(paged.items == items(1...2), "the first page was dropped")
    #expect(paged.hasPreviousPage)
    #expect(paged.content?.droppedPageCount == 1)

    let previous = Task { try await paged.loadPreviousPage() }
    try await source.control.waitForStart(4)
    #expect(paged.previousPageStatus == .loading)
    source.control.resolve(page(0, next: 1))
    try await previous.outcome
    #expect(paged.items == items(0...1), "the first page is back, the last one dropped")
    #expect(!paged.hasPreviousPage)
    #expect(paged.hasNextPage)
    try await paged.loadPreviousPage()  // nothing before the first page
    #expect(source.control.startCount == 4)

    try await source.loadNext(paged, resolving: 2, next: 3)
    #expect(paged.items == items(1...2))
    #expect(source.requests.values == [nil, 1, 2, nil, 2])
  }

  /// Pages dropped from the far end while going back are forgotten as cursors seen: loading
  /// forward again through the same pages repeats no cursor (only a cursor that comes back among
  /// the pages held is ``LoadableError/repeatedCursor``).
  @Test func pagesDroppedGoingBackAreNoRepeatedCursorsGoingForwardAgain() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage(maximumPages: 1)
    try await source.loadNext(paged, resolving: 1, next: 2)
    try await source.loadNext(paged, resolving: 2, next: 3)
    #expect(paged.items == items(2...2))
    for number in [1, 0] {  // back to the first page, one page at a time
      let started = source.control.startCount
      let previous = Task { try await paged.loadPreviousPage() }
      try await source.control.waitForStart(started + 1)
      source.control.resolve(page(number, next: number + 1))
      try await previous.outcome
    }
    #expect(paged.items == items(0...0))
    // Page 1 again, whose next cursor (2) belongs to a page dropped on the way back.
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(paged.nextPageError == nil)
    #expect(paged.items == items(1...1))
  }

  @Test func aCursorThatRepeatsIsATypedErrorNotALoop() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    try await source.loadNext(paged, resolving: 1, next: 2)

    // Page 2 points back to page 1.
    let loop = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(3)
    source.control.resolve(page(2, next: 1))
    await #expect(throws: LoadableError.repeatedCursor) { try await loop.outcome }
    #expect(paged.items == items(0...1))
    #expect(paged.nextPageError as? LoadableError == .repeatedCursor)

    // Page 2 points to itself.
    let again = Task { try await paged.retryNextPage() }
    try await source.control.waitForStart(4)
    source.control.resolve(page(2, next: 2))
    await #expect(throws: LoadableError.repeatedCursor) { try await again.outcome }
    #expect(paged.items == items(0...1))
    #expect(source.requests.values == [nil, 1, 2, 2])
  }

  @Test func observersSeeTheNextPageLoadAndThePagesChange() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let statusChanged = Recorder<Bool>()
    withObservationTracking {
      _ = paged.nextPageStatus
    } onChange: {
      statusChanged.append(true)
    }
    let itemsChanged = Recorder<Bool>()
    withObservationTracking {
      _ = paged.items
    } onChange: {
      itemsChanged.append(true)
    }
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    await eventually { statusChanged.count == 1 }
    #expect(itemsChanged.count == 0)
    source.control.resolve(page(1, next: 2))
    try await next.outcome
    #expect(itemsChanged.count == 1)
  }

  /// Before the first page, the next page is the first page: an attempt of the engine, which
  /// loads the paged loadable's declared dependency (a search's portal) first.
  @Test func theFirstPageIsTheNextPageAndLoadsItsDependencyFirst() async throws {
    let portal = ControlledLoad<String>()
    let portalLoadable = portal.makeLoadable()
    let source = PagedSource()
    let paged = source.makeLoadable()
    paged.addDependency(portalLoadable)
    let load = Task { try await paged.loadNextPage() }
    try await portal.waitForStart()
    #expect(source.control.startCount == 0, "the first page waits for its portal")
    portal.resolve("portal")
    try await source.control.waitForStart()
    source.control.resolve(page(0, next: 1))
    try await load.outcome
    #expect(paged.items == items(0...0))
    #expect(paged.loadStatus == .loaded)
  }

  /// Each page's request is an attempt of the engine: the paged loadable's instrument hears of
  /// it, under the page's name.
  @Test func thePagedLoadablesInstrumentSeesEachPageAttempt() async throws {
    let source = PagedSource()
    let paged = source.makeLoadable(name: "search")
    let instrument = RecordingInstrument()
    paged.instrument = instrument
    paged.sync()
    try await source.control.waitForStart(1)
    source.control.resolve(page(0, next: 1))
    await eventually { paged.loadStatus == .loaded }
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(instrument.starts.map(\.name) == ["search", "search.nextPage(1)"])
    await eventually { instrument.ends.count == 2 }
    instrument.expectBalanced()
  }

  /// The dependency tree shows the next page's load under the paged loadable, beside its
  /// dependencies, while it runs and after it failed; a page that landed is no longer there.
  @Test func theDependencyTreeShowsTheNextPagesLoad() async throws {
    let source = PagedSource()
    let paged = source.makeLoadable(name: "search")
    paged.addDependency(AsyncLoadable(name: "portal", content: "portal"))
    paged.sync()
    try await source.control.waitForStart(1)
    source.control.resolve(page(0, next: 1))
    await eventually { paged.loadStatus == .loaded }
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    #expect(
      paged.dependencyTree(showingDurations: false) == """
        search [loaded]
        ├─ portal [loaded]
        └─ search.nextPage(1) [loading] (incidental)
        """)
    source.control.fail(Boom(code: 1))
    await #expect(throws: Boom(code: 1)) { try await next.outcome }
    #expect(paged.dependencyTree(showingDurations: false).hasSuffix("└─ search.nextPage(1) [failed: Boom(code: 1)] (incidental)"))
    let retry = Task { try await paged.retryNextPage() }
    try await source.control.waitForStart(3)
    source.control.resolve(page(1, next: 2))
    try await retry.outcome
    #expect(paged.dependencyTree(showingDurations: false) == "search [loaded]\n└─ portal [loaded]")
  }

  /// A caller whose task is cancelled leaves at once; the shared request goes on for the others
  /// and its page lands.
  @Test func aCancelledCallerLeavesTheNextPageToTheOthers() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let leaving = Task { try await paged.loadNextPage() }
    let staying = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    await eventually { (paged.pageLoadable(toward: .next)?.waiterCount ?? 0) == 2 }
    leaving.cancel()
    await #expect(throws: CancellationError.self) { try await leaving.outcome }
    #expect(source.control.cancelledCount == 0, "the request goes on")
    #expect(paged.nextPageStatus == .loading)
    source.control.resolve(page(1, next: 2))
    try await staying.outcome
    #expect(paged.items == items(0...1))
    #expect(source.control.startCount == 2)
  }

  /// The paged loadable composes: a `map` over it is a live view that follows the pages.
  @Test func aMapOverThePagesFollowsEachPage() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let count = paged.map { $0.items.count }
    #expect(try await count.fetchIfNeeded() == 2)
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(count.content == 4)
    try await source.loadNext(paged, resolving: 2, next: nil)
    #expect(count.content == 6)
    #expect(count.loadStatus == .loaded)
  }

  /// Every handler hears every change, not only the first one registered (a loop over them
  /// stopped after the first passed the suite).
  @Test func everyHandlerSeesThePages() async throws {
    let source = PagedSource()
    let paged = source.makeLoadable()
    let seen = (0..<3).map { _ in Recorder<String>() }
    let observations = seen.map { recorder in
      paged.observePages { snapshot in recorder.append("\(snapshot.status) \(snapshot.items.count)") }
    }
    paged.sync()
    try await source.control.waitForStart(1)
    source.control.resolve(page(0, next: 1))
    await eventually { paged.loadStatus == .loaded }
    for recorder in seen {
      await eventually { recorder.values.last == "loaded 2" }
      #expect(recorder.values.contains("loading 0"))
    }
    for observation in observations { observation.cancel() }
  }

  /// A handler sees the current state first, then the first page, the next page loading, its
  /// failure, its retry and the pages it added; a stream sees the newest state.
  @Test func aHandlerAndAStreamSeeThePagesAndThePageLoads() async throws {
    let source = PagedSource()
    let paged = source.makeLoadable()
    let seen = Recorder<String>()
    let observation = paged.observePages { snapshot in
      seen.append("\(snapshot.status) \(snapshot.items.count) next:\(snapshot.nextPageStatus)")
    }
    #expect(seen.values == ["notLoaded 0 next:notLoaded"])
    paged.sync()
    try await source.control.waitForStart(1)
    source.control.resolve(page(0, next: 1))
    // Waited for as the handler hears it, not as the status reads: the delivery reads the state
    // when it runs, and a next page begun before that would be in the snapshot it delivers
    // (changes while a delivery is due are delivered together, as documented). Waiting for the
    // status failed once under ThreadSanitizer: the handler heard "loaded 2 next:loading" first.
    await eventually { seen.values.last == "loaded 2 next:notLoaded" }
    let failing = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(2)
    source.control.fail(Boom(code: 1))
    await #expect(throws: Boom(code: 1)) { try await failing.outcome }
    let retry = Task { try await paged.retryNextPage() }
    try await source.control.waitForStart(3)
    source.control.resolve(page(1, next: 2))
    try await retry.outcome
    await eventually { seen.values.last == "loaded 4 next:notLoaded" }
    let states = seen.values
    for state in ["loading 0 next:notLoaded", "loaded 2 next:notLoaded", "loaded 2 next:loading", "loaded 2 next:failed"] {
      #expect(states.contains(state), "\(states)")
    }
    observation.cancel()
    let count = seen.count
    paged.sync()
    #expect(seen.count == count, "a cancelled observation hears nothing")

    var updates = paged.pageUpdates.makeAsyncIterator()
    let first = await updates.next()
    #expect(first?.status == .loading && first?.items.count == 4)
    try await source.control.waitForStart(4)
    source.control.resolve(page(0, next: 1))
    var last = first
    while last?.status != .loaded { last = await updates.next() }
    #expect(last?.items.count == 2)
  }

  /// The previous page has the next page's semantics, in its own slot: a failure sticks until
  /// its retry, a cancel leaves the pages and the next page's load alone.
  @Test func thePreviousPageFailsStickilyAndCancelsOnItsOwn() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage(maximumPages: 1)
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(paged.items == items(1...1))

    let failing = Task { try await paged.loadPreviousPage() }
    try await source.control.waitForStart(3)
    source.control.fail(Boom(code: 0))
    await #expect(throws: Boom(code: 0)) { try await failing.outcome }
    #expect(paged.previousPageStatus == .failed && paged.nextPageStatus == .notLoaded)
    await #expect(throws: Boom(code: 0)) { try await paged.loadPreviousPage() }
    #expect(source.control.startCount == 3, "sticky: no request")
    #expect(paged.items == items(1...1))

    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(4)
    let previous = Task { try await paged.retryPreviousPage() }
    try await source.control.waitForStart(5)
    paged.cancelPreviousPage()
    await #expect(throws: CancellationError.self) { try await previous.outcome }
    #expect(paged.previousPageStatus == .notLoaded)
    #expect(paged.nextPageStatus == .loading, "the next page's load goes on")
    source.control.resolve(page(2, next: nil))
    try await next.outcome
    #expect(paged.items == items(2...2))
    #expect(paged.content?.droppedPageCount == 2)
    #expect(source.requests.values == [nil, 1, nil, 2, nil])
  }

  /// A failed page load sticks for its cursor only while that cursor is the one to load: when a
  /// page landing at the other end drops the page it borders (the bound), the failure is of a page
  /// no longer next (or previous) and is forgotten, as a landed page's slot is — the status reads
  /// `notLoaded`, and the next call loads the new cursor. It read `failed` until that call, which
  /// then made a request all the same (found by the review of the paged loadable, helper 34).
  @Test(arguments: [PageDirection.next, .previous])
  func aFailedPageLoadIsForgottenWhenTheBoundDropsThePageItBorders(_ failing: PageDirection) async throws {
    let source = PagedSource()
    let paged = try await source.scrolledPastTheBound()
    #expect(paged.items == items(1...2) && paged.hasPreviousPage)

    // The page toward `failing` fails: page 3 after the last, or page 0 before the first.
    let failed = Task { try await failing == .next ? paged.loadNextPage() : paged.loadPreviousPage() }
    try await source.control.waitForStart(4)
    source.control.fail(Boom(code: 7))
    await #expect(throws: Boom(code: 7)) { try await failed.outcome }
    #expect(paged.pageState(toward: failing).status == .failed)

    // The other end lands and the bound drops the page the failed load bordered.
    if failing == .next {
      let previous = Task { try await paged.loadPreviousPage() }
      try await source.control.waitForStart(5)
      source.control.resolve(page(0, next: 1))
      try await previous.outcome
      #expect(paged.items == items(0...1))
    } else {
      try await source.loadNext(paged, resolving: 3, next: 4)
      #expect(paged.items == items(2...3))
    }
    let state = paged.pageState(toward: failing)
    #expect(state.status == .notLoaded && state.error == nil, "a failure of a page no longer \(failing): \(state)")

    // The next call loads the page that borders the pages held now.
    let again = Task { try await failing == .next ? paged.loadNextPage() : paged.loadPreviousPage() }
    try await source.control.waitForStart(6)
    source.control.resolve(failing == .next ? page(2, next: 3) : page(1, next: 2))
    try await again.outcome
    #expect(source.requests.values == (failing == .next ? [nil, 1, 2, 3, nil, 2] : [nil, 1, 2, nil, 3, 1]))
  }

  /// The same when the page load is still running as the bound drops the page it borders, and
  /// fails only afterwards: its failure is forgotten as it comes (it stuck for a cursor nothing
  /// loads with any more; the review of 1fc69fc, helper 38).
  @Test func aPageLoadThatFailsAfterThePageItBordersWasDroppedDoesNotStick() async throws {
    let source = PagedSource()
    let paged = try await source.scrolledPastTheBound()
    #expect(paged.items == items(1...2) && paged.hasPreviousPage)

    // The previous page (request 4) and then the next page (request 5, cursor 3) both load.
    let previous = Task { try await paged.loadPreviousPage() }
    try await source.control.waitForStart(4)
    let next = Task { try await paged.loadNextPage() }
    try await source.control.waitForStart(5)
    #expect(source.requests.values == [nil, 1, 2, nil, 3])

    // The previous page lands: the bound drops page 2, which the running next-page load borders.
    source.control.resolve(page(0, next: 1))
    try await previous.outcome
    #expect(paged.items == items(0...1))
    #expect(paged.nextPageStatus == .loading)  // still running: it stays, as documented

    // Now it fails: a failure of cursor 3, which is no longer the next page's cursor (2 is).
    source.control.fail(Boom(code: 9))
    await #expect(throws: Boom(code: 9)) { try await next.outcome }
    let state = paged.pageState(toward: .next)
    #expect(
      state.status == .notLoaded && state.error == nil,
      "a failure of a page no longer next sticks: \(state), nextPageStatus \(paged.nextPageStatus)")
  }

  /// `pageUpdates` "ends when the loadable is deallocated" (its documentation), as
  /// `loadStatusUpdates` does (`AsyncLoadableTests.aDeallocatedLoadableEndsItsStreams`). Found by
  /// a review (helper 34): nothing finished the stream, and a reader waited for ever.
  @Test func aDeallocatedPagedLoadableEndsItsPageUpdates() async {
    var paged: PagedLoadable<Int, String>? = PagedLoadable { _ in Page(items: [], nextCursor: nil) }
    let stream = paged!.pageUpdates
    weak let released = paged
    paged = nil
    #expect(released == nil, "the paged loadable is deallocated")
    let ended = Recorder<Int>()
    let reader = Task {
      var count = 0
      for await _ in stream { count += 1 }
      ended.append(count)
    }
    await eventually(10_000, timeout: .seconds(3)) { ended.count == 1 }
    reader.cancel()
    _ = await reader.value
    #expect(ended.values.first == 1, "\(ended.values)")
  }

  /// LoadingPages.md (observePages): "Observation ends when the returned LoadObservation is
  /// cancelled": a handler whose observation was cancelled — here by another handler, in the same
  /// delivery pass, on the same thread — is not called after `cancel()` returned. Found by a
  /// review (helper 34): a pass called every handler it had copied.
  @Test func aCancelledPageObservationIsNotCalledAfterCancelReturns() async throws {
    let source = PagedSource()
    let paged = source.makeLoadable()
    let armed = Recorder<Bool>()
    let observations = Mutex<[LoadObservation]>([])
    let cancelled = Mutex<Set<Int>>([])
    let lateCalls = Recorder<Int>()
    for index in 0..<2 {
      let observation = paged.observePages { _ in
        guard armed.count > 0 else { return }
        if cancelled.withLock({ $0.contains(index) }) {
          lateCalls.append(index)
          return
        }
        let other = 1 - index
        let toCancel = cancelled.withLock { set -> Bool in set.insert(other).inserted }
        if toCancel { observations.withLock { $0[other] }.cancel() }
      }
      observations.withLock { $0.append(observation) }
    }
    armed.append(true)
    paged.sync()
    try await source.control.waitForStart(1)
    source.control.resolve(page(0, next: nil))
    await eventually { paged.loadStatus == .loaded }
    #expect(lateCalls.values.isEmpty, "handlers called after their observation was cancelled: \(lateCalls.values)")
    observations.withLock { $0 }.forEach { $0.cancel() }
  }

  /// LoadingPages.md: `nextPageStatus` is `loading` while one runs, `failed` after a failure,
  /// "otherwise notLoaded — a page that loads is added to the pages". A handler of
  /// `observePages` never sees `nextPageStatus == .loaded`: a page load that loaded reads
  /// `loading` until its page is added. Found by a review (helper 34): every next page showed
  /// `loaded` with the page not yet in the items.
  @Test func aHandlerNeverSeesTheNextPageLoadedButNotAdded() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let seen = Recorder<String>()
    let observation = paged.observePages { snapshot in
      seen.append("next:\(snapshot.nextPageStatus) items:\(snapshot.items.count)")
    }
    try await source.loadNext(paged, resolving: 1, next: 2)
    await eventually { seen.values.last == "next:notLoaded items:4" }
    #expect(!seen.values.contains { $0.hasPrefix("next:loaded") }, "\(seen.values)")
    observation.cancel()
  }

  /// LoadingPages.md: "when it lands, the page is added *before* its callers resume, so a caller
  /// finds it in `items`". A caller that asks for the next page in the window between the page
  /// load's status becoming `.loaded` and the page being added (here: from a status handler on
  /// the landing thread) lands it itself and returns with it in `items`. Found by a review
  /// (helper 34): it returned without the page.
  @Test func aCallerThatJoinsAsThePageLandsFindsItInItems() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let executor = ManualTaskExecutor()
    let found = Recorder<String>()
    let done = Recorder<Bool>()
    let observation = paged.observePages { snapshot in
      // The page load loaded, and its page is not added yet (its status handlers run first).
      guard paged.pageLoadable(toward: .next)?.loadStatus == .loaded, done.count == 0 else { return }
      done.append(true)
      executor.spawn {
        do {
          try await paged.loadNextPage()
          found.append("returned, items:\(paged.items.count)")
        } catch {
          found.append("threw \(error)")
        }
      }
      executor.runInOrder()
    }
    try await source.loadNext(paged, resolving: 1, next: 2)
    #expect(paged.items == items(0...1))
    #expect(done.count == 1, "the window was reached")
    executor.runInOrder()
    #expect(found.values == ["returned, items:4"], "\(found.values) (source requests: \(source.requests.values))")
    observation.cancel()
  }

  /// LoadingPages.md: "Before the first page has loaded — nothing loaded, a refresh running, or the
  /// first page failed — the next page *is* the first page: `loadNextPage()` does what `load()`
  /// does", and "A refresh that starts while it loads supersedes it: the callers then wait for the
  /// fresh first page instead." Found by a review (helper 34): the superseded page load ran its
  /// request during the refresh, and its caller returned before the fresh first page.
  ///
  /// Interleaving: `loadNextPage()` takes a fresh page load from `pageLoad` (replacing a stale one,
  /// which runs the page observers synchronously), a refresh starts right then (here: from that
  /// observer, standing for another thread's `sync()`) and supersedes the fresh page load while it
  /// is still idle (`retire` → `cancelLoad()` on an idle loadable does nothing); the caller then
  /// calls `page.load()` on the retired page load: a request for the stale cursor runs during the
  /// refresh, its page is dropped, and the caller returns before the fresh first page landed.
  @Test func aPageLoadSupersededBeforeItStartsDoesNotRunAndItsCallerWaitsForTheRefresh() async throws {
    let control = ControlledLoad<Page<Int, String>>()
    let control3 = ControlledLoad<Page<Int, String>>()
    let armed = Recorder<Bool>()
    let requests = Recorder<Int?>()
    let paged = PagedLoadable<Int, String>(name: "paged", maximumPages: 2) { cursor in
      requests.append(cursor)
      if cursor == 3 { return try await control3.operation() }
      if cursor == 2, armed.count > 0 { return page(2, next: 3, tag: "stale") }
      return try await control.operation()
    }
    paged.sync()
    try await control.waitForStart(1)
    control.resolve(page(0, next: 1))
    await eventually { paged.loadStatus == .loaded }
    let second = Task { try await paged.loadNextPage() }
    try await control.waitForStart(2)
    control.resolve(page(1, next: 2))
    try await second.outcome
    let third = Task { try await paged.loadNextPage() }
    try await control.waitForStart(3)
    control.resolve(page(2, next: 3))
    try await third.outcome
    #expect(paged.items == items(1...2) && paged.hasPreviousPage)

    // Page 3 loads (in its slot) while the previous page comes back and drops page 2.
    let fourth = Task { try await paged.loadNextPage() }
    try await control3.waitForStart(1)
    let previous = Task { try await paged.loadPreviousPage() }
    try await control.waitForStart(4)
    control.resolve(page(0, next: 1))
    try await previous.outcome
    #expect(paged.items == items(0...1))
    #expect(paged.nextPageStatus == .loading, "page 3's load is still in the slot")

    // A refresh starts just after `pageLoad` made the load for cursor 2.
    let refreshed = Recorder<Bool>()
    let observation = paged.observePages { snapshot in
      guard armed.count > 0, refreshed.count == 0, snapshot.nextPageStatus == .notLoaded else { return }
      refreshed.append(true)
      paged.sync()
    }
    armed.append(true)
    // The caller records the first page's status when it returns: loaded, when it waited for the
    // fresh first page; loading, when it returned while the refresh ran.
    let statusAtReturn = Recorder<LoadStatus>()
    let caller = Task {
      try await paged.loadNextPage()
      statusAtReturn.append(paged.loadStatus)
    }
    try await control.waitForStart(5)  // the refresh's first page
    #expect(refreshed.count == 1, "the refresh started")
    control.resolve(page(0, next: 1, tag: "'"))
    try await caller.outcome
    #expect(statusAtReturn.values == [.loaded], "the caller waited for the fresh first page: \(statusAtReturn.values)")
    #expect(!requests.values.dropFirst(4).contains(2), "no request for the stale page during the refresh: \(requests.values)")
    #expect(paged.items == ["0'.a", "0'.b"])
    _ = await fourth.result
    observation.cancel()
  }

  /// LoadingPages.md, Refreshing: "When it starts, the page loads under way are superseded: ...
  /// their callers wait for the fresh first page instead (they do not fail)". With 01f7988 a page
  /// load that loaded reads `loading` until it lands; a refresh that starts in that window (here
  /// from a page observer, on the landing thread) supersedes it, and its caller waits for the
  /// fresh first page. Found by a second review (helper 35): the caller returned at once, while
  /// the refresh ran, without the page and without the fresh first page.
  @Test func aRefreshWhileTheNextPageReadsLoadingMakesItsCallerWaitForTheFreshFirstPage() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let executor = ManualTaskExecutor()
    let atReturn = try await source.nextPageCaller(of: paged, on: executor)
    let seenInWindow = Recorder<LoadStatus>()
    let observation = source.onceTheNextPageLandsLater(paged) { snapshot in
      seenInWindow.append(snapshot.nextPageStatus)
      paged.sync()  // pull to refresh while the next page reads `loading`
    }
    #expect(source.control.resolve(page(1, next: 2)))
    _ = executor.runInOrder()
    await eventually { atReturn.count == 1 || source.control.startCount == 3 }
    #expect(seenInWindow.values == [.loading], "the refresh started while nextPageStatus read loading")
    try await source.control.waitForStart(3)  // the refresh's first page
    _ = executor.runInOrder()
    let beforeRefreshLanded = atReturn.values
    #expect(source.control.resolve(page(0, next: 1, tag: "'")))
    _ = executor.runInOrder()
    await eventually { paged.loadStatus == .loaded }
    _ = executor.runInOrder()
    await eventually { atReturn.count == 1 }
    #expect(
      beforeRefreshLanded.isEmpty && atReturn.values == ["returned status:loaded items:2"],
      "the caller waits for the fresh first page; it returned: \(beforeRefreshLanded) then \(atReturn.values)")
    observation.cancel()
  }

  /// `cancelNextPage()`: "Cancels the next page's request, if one runs"; `nextPageStatus`:
  /// "loading while one runs". In the window where the status reads `loading` (a page load that
  /// loaded and has not landed), a cancel drops it: the status reads `notLoaded`, the page is not
  /// added, and its caller gets `CancellationError`. Found by a second review (helper 35): the
  /// cancel did nothing, and the page was added.
  @Test func aCancelWhileTheNextPageReadsLoadingCancelsIt() async throws {
    let source = PagedSource()
    let paged = try await source.loadedFirstPage()
    let executor = ManualTaskExecutor()
    let outcome = try await source.nextPageCaller(of: paged, on: executor)
    let window = Recorder<String>()
    let observation = source.onceTheNextPageLandsLater(paged) { snapshot in
      window.append("before cancel: \(snapshot.nextPageStatus)")
      paged.cancelNextPage()
      window.append("after cancel: \(paged.nextPageStatus)")
    }
    #expect(source.control.resolve(page(1, next: 2)))
    await eventually { executor.pendingJobCount > 0 || outcome.count == 1 }
    _ = executor.runInOrder()
    await eventually { outcome.count == 1 }
    #expect(window.values.first == "before cancel: loading")
    #expect(
      window.values.last != "after cancel: loading",
      "a cancel of a page that reads loading left it loading: \(window.values); caller: \(outcome.values), items \(paged.items.count)")
    #expect(outcome.values == ["threw CancellationError"])
    #expect(paged.items == items(0...0))
    observation.cancel()
  }
}
