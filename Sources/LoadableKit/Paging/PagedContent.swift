/// One page as the source returns it: its items, and the cursor of the page after it.
///
/// A paged loadable's `load` closure returns one for each cursor it is asked for:
///
/// ```swift
/// let results = PagedLoadable<Int, Item> { start in
///   let answer = try await portal.search(query, start: start ?? 1, num: 20)
///   return Page(items: answer.results, nextCursor: answer.nextStart == -1 ? nil : answer.nextStart)
/// }
/// ```
public struct Page<Cursor: Hashable & Sendable, Item: Sendable>: Sendable {
  /// The page's items, in the source's order.
  public var items: [Item]
  /// The cursor that loads the page after this one; `nil` on the last page.
  public var nextCursor: Cursor?

  /// Creates a page.
  /// - Parameters:
  ///   - items: the page's items.
  ///   - nextCursor: the cursor of the next page, `nil` when this is the last one.
  public init(items: [Item], nextCursor: Cursor?) {
    self.items = items
    self.nextCursor = nextCursor
  }
}

/// The pages a ``PagedLoadable`` holds: the content of its engine, one value read in one step.
///
/// The pages are contiguous: each one is the page after the one before it. With a
/// ``PagedLoadable/maximumPages`` bound, pages dropped before the first one held can be loaded
/// again (``PagedLoadable/loadPreviousPage()``); pages dropped after the last one are simply
/// the next pages again.
public struct PagedContent<Cursor: Hashable & Sendable, Item: Sendable>: Sendable {
  /// The pages held, in order.
  public private(set) var pages: [Page<Cursor, Item>]
  /// The cursor that loaded each held page (`nil` for the first page of the list), in order.
  var cursors: [Cursor?]
  /// The cursors of the pages dropped before the first one held, the nearest last.
  var droppedCursors: [Cursor?]
  /// Every cursor of a page held or dropped before the first one held: a next page that points
  /// back to one of them would start a loop.
  var seenCursors: Set<Cursor>
  /// Which first-page attempt these pages descend from: a page loaded for older pages is dropped.
  let generation: UInt64

  init(firstPage: Page<Cursor, Item>, generation: UInt64) {
    pages = [firstPage]
    cursors = [nil]
    droppedCursors = []
    seenCursors = []
    self.generation = generation
  }

  /// Every held page's items, in order.
  ///
  /// - Complexity: O(*n*), *n* the number of items held.
  public var items: [Item] { pages.flatMap(\.items) }

  /// Whether the source has a page after the last one held (its `nextCursor` is not `nil`).
  public var hasNextPage: Bool { pages.last?.nextCursor != nil }

  /// Whether pages before the first one held were dropped (the ``PagedLoadable/maximumPages``
  /// bound) and can be loaded again.
  public var hasPreviousPage: Bool { !droppedCursors.isEmpty }

  /// How many pages come before the first one held: dropped, to be loaded again by
  /// ``PagedLoadable/loadPreviousPage()``.
  public var droppedPageCount: Int { droppedCursors.count }

  /// The cursor of the page to load in `direction`; `nil` when there is none.
  func cursor(toward direction: PageDirection) -> Cursor?? {
    switch direction {
    case .next:
      guard let next = pages.last?.nextCursor else { return nil }
      return .some(next)
    case .previous:
      return droppedCursors.last
    }
  }

  /// Adds `page`, loaded with `cursor` toward `direction`, dropping the far end beyond
  /// `maximumPages`. `false` (and nothing changed) when the page no longer borders the pages held.
  mutating func insert(_ page: Page<Cursor, Item>, loadedWith cursor: Cursor?, toward direction: PageDirection, maximumPages: Int?) -> Bool {
    switch direction {
    case .next:
      guard let cursor, pages.last?.nextCursor == cursor else { return false }
      pages.append(page)
      cursors.append(cursor)
      seenCursors.insert(cursor)
      if let maximumPages, pages.count > maximumPages {
        pages.removeFirst()
        droppedCursors.append(cursors.removeFirst())
      }
    case .previous:
      // It leads to the first page held: its load checked that against the page that was first
      // when it was made (``LoadableError/sourceMoved``), which is first still if its cursor is
      // the nearest dropped one.
      guard let last = droppedCursors.last, last == cursor else { return false }
      droppedCursors.removeLast()
      pages.insert(page, at: 0)
      cursors.insert(cursor, at: 0)
      if let maximumPages, pages.count > maximumPages {
        pages.removeLast()
        // The next page again: nothing to remember but the new last page's `nextCursor`.
        if let dropped = cursors.removeLast() { seenCursors.remove(dropped) }
      }
    }
    return true
  }
}

/// Which end of the pages held a page load extends.
enum PageDirection: Sendable {
  case next, previous

  /// The other end of the pages held.
  var opposite: PageDirection { self == .next ? .previous : .next }
}
