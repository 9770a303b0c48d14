import Synchronization

/// The loadable of one page after (or before) the pages a ``PagedLoadable`` holds: each page
/// load is an attempt of the engine, so callers share it, a failure sticks until a retry,
/// `cancelLoad()` cancels it, and observers and instruments see it as they see any attempt.
///
/// It lives in its paged loadable's slot for its direction until it lands (its page is added and
/// the slot emptied), is cancelled, or is superseded by a refresh.
final class PageLoadable<Cursor: Hashable & Sendable, Item: Sendable>: AsyncLoadable<Page<Cursor, Item>>, @unchecked Sendable {
  /// Why a page load left its slot before it landed.
  enum Retirement: UInt8 {
    case none = 0
    /// ``PagedLoadable/cancelNextPage()`` or ``PagedLoadable/cancelPreviousPage()``.
    case cancelled = 1
    /// A refresh of the first page, or pages that changed under it: its callers wait for the
    /// paged loadable instead.
    case superseded = 2
  }

  let direction: PageDirection
  /// The cursor this page loads with (`nil`: the first page of the list, loaded again after the
  /// bound dropped it).
  let cursor: Cursor?
  /// The generation of the pages it extends (see ``PagedContent``).
  let generation: UInt64
  /// The cursors before this page when it was made, to catch a source that loops.
  let seenCursors: Set<Cursor>
  let fetch: @Sendable (Cursor?) async throws -> Page<Cursor, Item>
  /// Weak: the paged loadable holds this page in its slot. Set once, in `init`.
  weak let owner: PagedLoadable<Cursor, Item>?
  private let retirementCode = Atomic<UInt8>(Retirement.none.rawValue)
  /// Set, under the slots' lock, by the step of ``PagedLoadable/pageLanded(_:from:)`` that goes on
  /// to add its page: a cancel from then on is too late.
  let isLanding = Atomic<Bool>(false)
  /// For a previous page, the cursor of the first page held when it was made: the page it loads
  /// must lead to it.
  let bordering: Cursor?

  init(
    owner: PagedLoadable<Cursor, Item>, direction: PageDirection, cursor: Cursor?, content: PagedContent<Cursor, Item>,
    fetch: @escaping @Sendable (Cursor?) async throws -> Page<Cursor, Item>
  ) {
    self.owner = owner
    self.direction = direction
    self.cursor = cursor
    self.generation = content.generation
    self.seenCursors = content.seenCursors
    self.bordering = direction == .previous ? content.cursors.first ?? nil : nil
    self.fetch = fetch
    super.init()
  }

  var retirement: Retirement { Retirement(rawValue: retirementCode.load(ordering: .acquiring)) ?? .none }

  /// Marks the page retired for `reason`: called under the slots' lock, in the step that takes it
  /// out of its slot, so that whoever finds it gone from its slot finds it retired
  /// (``PagedLoadable/loadPage(toward:retry:)``). Then ``retire()``, after the lock.
  func markRetired(_ reason: Retirement) {
    retirementCode.store(reason.rawValue, ordering: .releasing)
  }

  /// Cancels the retired page's attempt, if one runs.
  func retire() {
    cancelLoad()
  }

  override func performLoad() async throws -> Page<Cursor, Item> {
    // Retired before its attempt started (a refresh superseded it, or it was cancelled, between
    // a caller taking it from its slot and loading it): no request for a page nobody will add.
    if retirement != .none { throw CancellationError() }
    let page = try await fetch(cursor)
    if direction == .next, let cursor, let next = page.nextCursor, next == cursor || seenCursors.contains(next) {
      throw LoadableError(code: .repeatedCursor, message: "the source returned the next cursor \(next) a second time")
    }
    if direction == .previous, let bordering, page.nextCursor != bordering {
      throw LoadableError(
        code: .sourceMoved,
        message: "the page before the first page held leads to \(page.nextCursor.map { "\($0)" } ?? "no page"), not to \(bordering)")
    }
    return page
  }

  /// The attempt landed: the page joins the pages held (before its callers resume, so that a
  /// caller of ``PagedLoadable/loadNextPage()`` finds it there). Or it failed: the failure sticks
  /// only if its page still borders the pages held.
  override func attemptDidEnd(committed: Bool) {
    guard committed else { return }
    if let page = loadedContent() {
      owner?.pageLanded(page, from: self)
    } else {
      owner?.forgetFailedPageLoad(toward: direction)
    }
  }

  /// The paged loadable's observers of this direction hear of every status change.
  override func statusDidChange() {
    owner?.pageStatusDidChange(direction)
  }
}

extension PageLoadable: ContextualNaming {
  var contextualName: String {
    let side = direction == .next ? "nextPage" : "previousPage"
    return "\(owner?.displayName ?? "PagedLoadable").\(side)(\(cursor.map { "\($0)" } ?? "first"))"
  }
}
