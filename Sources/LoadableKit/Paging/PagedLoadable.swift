import Observation
import Synchronization

/// A list that loads page by page — a portal search, a feature query — built on the engine.
///
/// The first page is the loadable's own attempt: ``AsyncLoadable/load()``,
/// ``AsyncLoadable/retryLoad()``, ``AsyncLoadable/cancelLoad()``, ``AsyncLoadable/sync()`` and
/// ``AsyncLoadable/fetch()`` behave as on any ``AsyncLoadable`` (one shared attempt, sticky
/// failure, observers, dependencies such as the portal a search needs, the combinators). Its
/// ``AsyncLoadable/content`` is a ``PagedContent``: every page held.
///
/// Each further page is the attempt of a loadable of its own, made for the cursor the last page
/// returned: ``loadNextPage()`` from many callers shares one request, the pages held stay
/// readable while it runs, a failure fails only that page (sticky until ``retryNextPage()``),
/// and ``cancelNextPage()`` leaves the pages as they were.
///
/// ```swift
/// let search = PagedLoadable<Int, PortalItem>(name: "search") { start in
///   let answer = try await portal.search("parks", start: start ?? 1, num: 20)
///   return Page(items: answer.results, nextCursor: answer.nextStart == -1 ? nil : answer.nextStart)
/// }
/// try await search.load()             // the first page
/// try await search.loadNextPage()     // the second, shared by every caller that asks meanwhile
/// let shown = search.items            // both pages' items
/// search.sync()                       // from the first page again; the old pages show until it lands
/// ```
///
/// A refresh (``AsyncLoadable/sync()``, ``AsyncLoadable/fetch()``) loads the first page again and
/// supersedes a next or previous page still loading; the pages held stay until the fresh first
/// page lands, which then replaces them all. A source that returns a next cursor it returned
/// before fails that page with ``LoadableError/repeatedCursor`` instead of looping.
///
/// With ``maximumPages``, the pages held are bounded: loading past the bound drops the page at the
/// other end, which ``loadPreviousPage()`` (or ``loadNextPage()``) loads again from its cursor.
public final class PagedLoadable<Cursor: Hashable & Sendable, Item: Sendable>: AsyncLoadable<PagedContent<Cursor, Item>>,
  @unchecked Sendable
{
  // @unchecked like its superclass: every stored property is a `let` of a `Sendable` type, and
  // the page slots are behind their `Mutex`.

  /// The most pages held at once; `nil` for no bound. At least 1.
  public let maximumPages: Int?
  let fetch: @Sendable (Cursor?) async throws -> Page<Cursor, Item>
  /// The page loads under way or failed, one for each direction.
  private let slots = Mutex(Slots())
  /// Observation of the page loads' properties (the first page's go through the engine's).
  private let pageRegistrar = ObservationRegistrar()
  /// The next page's load, if any, for tests.
  var nextPageLoadableForTesting: PageLoadable<Cursor, Item>? { slots.withLock(owner: self) { $0.next } }
  /// The handlers of ``observePages(_:)``.
  let observers = Mutex(PageObservers<Cursor, Item>())

  struct Slots {
    var next: PageLoadable<Cursor, Item>?
    var previous: PageLoadable<Cursor, Item>?

    subscript(direction: PageDirection) -> PageLoadable<Cursor, Item>? {
      get { direction == .next ? next : previous }
      set {
        switch direction {
        case .next: next = newValue
        case .previous: previous = newValue
        }
      }
    }
  }

  /// Creates a paged loadable. Nothing loads until somebody loads it.
  ///
  /// - Parameters:
  ///   - maximumPages: the most pages to hold (at least 1); `nil`, the default, holds every page
  ///     loaded.
  ///   - load: loads the page for a cursor — `nil` for the first page, otherwise a cursor a page
  ///     returned. Called once per page attempt.
  public init(
    maximumPages: Int? = nil, load: @escaping @Sendable (_ cursor: Cursor?) async throws -> Page<Cursor, Item>
  ) {
    self.maximumPages = maximumPages.map { Swift.max(1, $0) }
    self.fetch = load
    super.init()
  }

  /// Creates a named paged loadable (see ``AsyncLoadable/displayName``); its page loads are named
  /// after it, such as `search.nextPage(21)`.
  public convenience init(
    name: String, maximumPages: Int? = nil,
    load: @escaping @Sendable (_ cursor: Cursor?) async throws -> Page<Cursor, Item>
  ) {
    self.init(maximumPages: maximumPages, load: load)
    self.name = name
  }

  deinit {
    // Ends the streams of ``pageUpdates`` (as the engine ends ``loadStatusUpdates``): their
    // readers would otherwise wait for a change that can never come.
    let ends = observers.withLock(owner: self) { observers in
      defer { observers.onEnd = [:] }
      return observers.onEnd.sorted { $0.key < $1.key }.map(\.value)
    }
    for end in ends { end() }
  }

  /// Loads the first page. Called once per attempt of the first page (a load, a retry, a
  /// refresh); it supersedes the page loads still running, which belong to the pages it replaces.
  public override func performLoad() async throws -> PagedContent<Cursor, Item> {
    supersedePageLoads()
    let generation = nextUniqueID()
    let page = try await fetch(nil)
    return PagedContent(firstPage: page, generation: generation)
  }

  // MARK: - The pages

  /// Every held page's items, in order; empty before the first page loaded. Observable.
  public var items: [Item] { content?.items ?? [] }

  /// Whether the source has a page after the last one held; `false` before the first page
  /// loaded. Observable.
  public var hasNextPage: Bool { content?.hasNextPage ?? false }

  /// Whether pages before the first one held were dropped by the ``maximumPages`` bound.
  /// Observable.
  public var hasPreviousPage: Bool { content?.hasPreviousPage ?? false }

  // MARK: - The next page

  /// Loads the page after the last one held and adds it.
  ///
  /// Callers that ask while it loads share the one request. The pages held stay readable meanwhile.
  /// A failure fails only this page: it throws that error, and so do later calls until
  /// ``retryNextPage()``. When the first page is not loaded (nothing loaded yet, a refresh under
  /// way, or a failed first page), this does what ``AsyncLoadable/load()`` does: the first page is
  /// the next page. Returns at once when there is no next page.
  ///
  /// A refresh that starts while it loads supersedes it: the callers then wait for the fresh first
  /// page instead. Cancelling the calling task makes this call throw `CancellationError` at once,
  /// while the shared request goes on.
  ///
  /// - Throws: the page's error, ``LoadableError/repeatedCursor``, `CancellationError`.
  nonisolated(nonsending) public func loadNextPage() async throws {
    try await loadPage(toward: .next, retry: false)
  }

  /// Loads the next page, trying it again when it failed, as ``AsyncLoadable/retryLoad()`` does.
  nonisolated(nonsending) public func retryNextPage() async throws {
    try await loadPage(toward: .next, retry: true)
  }

  /// Cancels the next page's request, if one runs: its callers throw `CancellationError`, the
  /// pages held stay as they were, and the next ``loadNextPage()`` starts a fresh request.
  public func cancelNextPage() {
    cancelPage(toward: .next)
  }

  /// The status of the next page's load: ``LoadStatus/loading`` while one runs,
  /// ``LoadStatus/failed`` after a failure (until a retry or a refresh), otherwise
  /// ``LoadStatus/notLoaded`` — a page that loads is added to the pages, and the page after it is
  /// not loaded yet. Observable.
  public var nextPageStatus: LoadStatus {
    pageRegistrar.access(self, keyPath: \.nextPageStatus)
    return pageState(toward: .next).status
  }

  /// The error of the next page's last load; non-`nil` exactly when ``nextPageStatus`` is
  /// ``LoadStatus/failed``. Observable.
  public var nextPageError: (any Error)? {
    pageRegistrar.access(self, keyPath: \.nextPageError)
    return pageState(toward: .next).error
  }

  // MARK: - The previous page

  /// Loads the nearest page before the first one held, which the ``maximumPages`` bound dropped,
  /// from its cursor, and adds it (dropping the last page if the bound needs it). It behaves as
  /// ``loadNextPage()`` does otherwise; it returns at once when no page was dropped.
  nonisolated(nonsending) public func loadPreviousPage() async throws {
    try await loadPage(toward: .previous, retry: false)
  }

  /// Loads the previous page, trying it again when it failed.
  nonisolated(nonsending) public func retryPreviousPage() async throws {
    try await loadPage(toward: .previous, retry: true)
  }

  /// Cancels the previous page's request, if one runs, as ``cancelNextPage()`` does.
  public func cancelPreviousPage() {
    cancelPage(toward: .previous)
  }

  /// The status of the previous page's load, as ``nextPageStatus``. Observable.
  public var previousPageStatus: LoadStatus {
    pageRegistrar.access(self, keyPath: \.previousPageStatus)
    return pageState(toward: .previous).status
  }

  /// The error of the previous page's last load, as ``nextPageError``. Observable.
  public var previousPageError: (any Error)? {
    pageRegistrar.access(self, keyPath: \.previousPageError)
    return pageState(toward: .previous).error
  }

  // MARK: - Page loads

  /// The page load's loadable in `direction`, for tests.
  func pageLoadable(toward direction: PageDirection) -> PageLoadable<Cursor, Item>? {
    slots.withLock(owner: self) { $0[direction] }
  }

  nonisolated(nonsending) func loadPage(toward direction: PageDirection, retry: Bool) async throws {
    guard let content = loadedContent() else {
      if retry { try await retryLoad() } else { try await load() }
      return
    }
    guard let cursor = content.cursor(toward: direction) else { return }
    let page = pageLoad(toward: direction, cursor: cursor, content: content)
    do {
      if retry { try await page.retryLoad() } else { try await page.load() }
      // Joined after the page's attempt ended but before it landed (its lander on another
      // thread), the caller lands it: it returns with the page in the pages, as the attempt's
      // own callers do.
      if let landed = page.loadedContent() { pageLanded(landed, from: page) }
    } catch {
      // A refresh took the page's place: its callers wait for the fresh first page. Not a caller
      // whose own task was cancelled: its wait ended for that, and it throws (SPEC §1).
      guard page.retirement == .superseded, !Task.isCancelled else { throw error }
      if retry { try await retryLoad() } else { try await load() }
      return
    }
    // It left its slot retired before it landed (a page load is marked retired in the step that
    // takes it out): a refresh's callers wait for the fresh first page, a cancel's get
    // `CancellationError`, as when it was retired while it loaded.
    switch page.retirement {
    case .none: return
    case .cancelled: throw CancellationError()
    case .superseded: if retry { try await retryLoad() } else { try await load() }
    }
  }

  /// The page load in `direction` for `cursor` and the pages `content`: the one in the slot when
  /// it is for them (so callers share it, and its failure sticks), otherwise a new one that
  /// supersedes it. A new one gets this loadable's ``AsyncLoadable/loadOptions`` and
  /// ``AsyncLoadable/instrument``: a page's request retries and times out as the first page's does.
  ///
  /// The slot's cursor is compared outside the slots' lock (`==` is the app's code), and the new
  /// load takes the slot only if it still holds the load compared; otherwise it compares again.
  private func pageLoad(
    toward direction: PageDirection, cursor: Cursor?, content: PagedContent<Cursor, Item>
  ) -> PageLoadable<Cursor, Item> {
    var fresh: PageLoadable<Cursor, Item>?
    while true {
      let current = slots.withLock(owner: self) { $0[direction] }
      if let current, current.generation == content.generation, current.cursor == cursor { return current }
      let page = fresh ?? makePageLoad(toward: direction, cursor: cursor, content: content)
      fresh = page
      let taken = slots.withLock(owner: self) { slots -> (took: Bool, replaced: PageLoadable<Cursor, Item>?) in
        guard slots[direction] === current else { return (false, nil) }  // another caller was first
        defer { slots[direction] = page }
        slots[direction]?.markRetired(.superseded)
        return (true, slots[direction])
      }
      guard taken.took else { continue }
      if let replaced = taken.replaced {
        replaced.retire()
        pageStatusDidChange(direction)
      }
      return page
    }
  }

  /// A new page load, with this loadable's options and instrument. Made outside the slots' lock:
  /// it reads this loadable's settings under the state's lock.
  private func makePageLoad(
    toward direction: PageDirection, cursor: Cursor?, content: PagedContent<Cursor, Item>
  ) -> PageLoadable<Cursor, Item> {
    let fresh = PageLoadable(owner: self, direction: direction, cursor: cursor, content: content, fetch: fetch)
    if let settings = state.withLock(owner: self, { $0.extras?.settings }), settings.options != nil || settings.instrument != nil {
      fresh.withState { state in
        state.more.settings = LoadableSettings(options: settings.options, name: nil, instrument: settings.instrument)
      }
    }
    return fresh
  }

  private func cancelPage(toward direction: PageDirection) {
    // A page load that loaded and has not landed reads loading (``pageState(toward:)``): a cancel
    // drops it too, and its result with it.
    guard let page = slots.withLock(owner: self, { $0[direction] }), [.loading, .loaded].contains(page.withState({ $0.status }))
    else { return }
    emptySlot(direction, ifHolding: page, retiring: .cancelled)
  }

  /// Empties `direction`'s slot if it still holds `load` — marking it retired for `reason`, if
  /// any, in the same step, and then cancelling it — and tells the observers. A cancel leaves a
  /// page load that is landing in its slot: its page is added, and its callers return.
  private func emptySlot(
    _ direction: PageDirection, ifHolding load: PageLoadable<Cursor, Item>, retiring reason: PageLoadable<Cursor, Item>.Retirement? = nil
  ) {
    let emptied = slots.withLock(owner: self) { slots -> Bool in
      // A cancel is too late for a page load whose page is being added (``pageLanded(_:from:)``).
      guard slots[direction] === load, reason != .cancelled || !load.isLanding.load(ordering: .relaxed) else { return false }
      slots[direction] = nil
      if let reason { load.markRetired(reason) }
      return true
    }
    guard emptied else { return }
    if reason != nil { load.retire() }
    pageStatusDidChange(direction)
  }

  /// Empties both slots and cancels their page loads: the pages they extend are being replaced.
  private func supersedePageLoads() {
    let (next, previous) = slots.withLock(owner: self) { slots in
      defer { slots = Slots() }
      slots.next?.markRetired(.superseded)
      slots.previous?.markRetired(.superseded)
      return (slots.next, slots.previous)
    }
    if let next {
      next.retire()
      pageStatusDidChange(.next)
    }
    if let previous {
      previous.retire()
      pageStatusDidChange(.previous)
    }
  }

  /// A refresh started (the status went to loading): the page loads of the pages it will replace
  /// end now, not when its work starts (``performLoad()`` supersedes them too, for a refresh
  /// whose change this hook heard late).
  override func statusDidChange() {
    if withState({ $0.status }) == .loading { supersedePageLoads() }
    pagesDidChange()
  }

  /// `load`'s page landed: it joins the pages held, unless its load left the slot (cancelled or
  /// superseded) or the pages changed under it (a fresh first page, or the far end it borders
  /// dropped), and then the slot is emptied for the page after it — in that order, so that a
  /// caller who finds the slot without it finds the page in the pages. Called by the attempt's
  /// end and by a caller who joined it after that end (``loadPage(toward:retry:)``): the second
  /// to come adds nothing (the page no longer borders the pages held).
  func pageLanded(_ page: Page<Cursor, Item>, from load: PageLoadable<Cursor, Item>) {
    let direction = load.direction
    // From this step on a cancel is too late: the page is being added (``cancelPage(toward:)``).
    guard
      slots.withLock(owner: self, { slots -> Bool in
        guard slots[direction] === load else { return false }
        load.isLanding.store(true, ordering: .relaxed)
        return true
      })
    else { return }
    // The pages are extended outside the lock (comparing and hashing cursors is the app's code),
    // and stored if the pages held are still the ones extended; otherwise extended again. Not
    // while a refresh runs — its status hook, which supersedes the page loads, may not have run
    // yet —: the page is dropped, and its callers wait for the fresh first page.
    var droppedFarEnd = false
    var refreshing = false
    while true {
      guard let read = withState({ state in state.contentBox.map { (box: $0, loaded: state.status == .loaded) } }) else { break }
      guard read.loaded else {
        refreshing = true
        break
      }
      var content = ContentBox<PagedContent<Cursor, Item>>.unbox(read.box)
      guard content.generation == load.generation else { break }
      let held = content.pages.count
      guard content.insert(page, loadedWith: load.cursor, toward: direction, maximumPages: maximumPages) else { break }
      // The old pages are released with the effects, after the lock: an item's `deinit` is user code.
      let stored = withState { state -> (effects: LoadStateMachine.Effects?, refreshing: Bool) in
        guard state.status == .loaded else { return (nil, true) }
        guard state.contentBox === read.box else { return (nil, false) }
        return (state.update(.success(ContentBox(content))).effects, false)
      }
      if stored.refreshing {
        refreshing = true
        break
      }
      guard let effects = stored.effects else { continue }
      perform(consume effects)
      droppedFarEnd = content.pages.count == held
      break
    }
    emptySlot(direction, ifHolding: load, retiring: refreshing ? .superseded : nil)
    if droppedFarEnd { forgetFailedPageLoad(toward: direction.opposite) }
  }

  /// A failed page load toward `direction` sticks (until a retry) only while its cursor is the one
  /// to load that way; once the bound dropped the page it bordered — before it failed or after —
  /// it is forgotten, as a landed page's load is, so that its failure does not stick for a cursor
  /// nothing loads with any more (the next call loads the page that borders the pages held now).
  /// Called when the bound drops the page at the far end, and when a page load fails. The cursors
  /// are compared outside the locks: `==` is the app's code.
  func forgetFailedPageLoad(toward direction: PageDirection) {
    guard let failed = slots.withLock(owner: self, { $0[direction] }), failed.withState({ $0.status }) == .failed
    else { return }
    if let content = loadedContent(), content.generation == failed.generation,
      let cursor = content.cursor(toward: direction), cursor == failed.cursor
    {
      return
    }
    emptySlot(direction, ifHolding: failed)
  }

  /// The page loads under way or failed, under the dependencies in the dependency tree (marked
  /// incidental: the first page does not wait for them).
  override var treeExtras: [(loadable: any Loadable, kind: DependencyKind)] {
    let (next, previous) = slots.withLock(owner: self) { ($0.next, $0.previous) }
    return [previous, next].compactMap { page in page.map { (loadable: $0 as any Loadable, kind: DependencyKind.incidental) } }
  }

  /// Tells observers of `direction`'s page properties that they changed.
  func pageStatusDidChange(_ direction: PageDirection) {
    switch direction {
    case .next:
      pageRegistrar.withMutation(of: self, keyPath: \.nextPageStatus) {}
      pageRegistrar.withMutation(of: self, keyPath: \.nextPageError) {}
    case .previous:
      pageRegistrar.withMutation(of: self, keyPath: \.previousPageStatus) {}
      pageRegistrar.withMutation(of: self, keyPath: \.previousPageError) {}
    }
    pagesDidChange()
  }

  func pageState(toward direction: PageDirection) -> (status: LoadStatus, error: (any Error)?) {
    guard let page = slots.withLock(owner: self, { $0[direction] }) else { return (.notLoaded, nil) }
    // A page load that loaded is still landing until it leaves the slot: loading, never loaded.
    return page.withState { ($0.status == .loaded ? .loading : $0.status, $0.status == .failed ? $0.error : nil) }
  }
}
