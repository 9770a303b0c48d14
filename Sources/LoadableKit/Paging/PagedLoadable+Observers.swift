import Synchronization

/// A paged loadable's state read for its observers: the first page's status, the pages, and the
/// page loads' statuses.
///
/// The first page's part (status, error, content) is read in one step, and each page load's part
/// in one step of its own: between them, a page may land.
public struct PagedSnapshot<Cursor: Hashable & Sendable, Item: Sendable>: Sendable {
  /// The first page's status (see ``AsyncLoadable/loadStatus``).
  public var status: LoadStatus
  /// The first page's error; non-`nil` exactly when ``status`` is ``LoadStatus/failed``.
  public var error: (any Error)?
  /// The pages held; `nil` before the first page loaded.
  public var content: PagedContent<Cursor, Item>?
  /// See ``PagedLoadable/nextPageStatus``.
  public var nextPageStatus: LoadStatus
  /// See ``PagedLoadable/nextPageError``.
  public var nextPageError: (any Error)?
  /// See ``PagedLoadable/previousPageStatus``.
  public var previousPageStatus: LoadStatus
  /// See ``PagedLoadable/previousPageError``.
  public var previousPageError: (any Error)?

  /// Every held page's items, in order.
  public var items: [Item] { content?.items ?? [] }
  /// Whether the source has a page after the last one held.
  public var hasNextPage: Bool { content?.hasNextPage ?? false }
}

/// The handlers of ``PagedLoadable/observePages(_:)``, and who delivers to them.
///
/// One thread at a time delivers: a change while it does marks the state changed, and the
/// deliverer calls every handler again with the newest snapshot. Handlers are called outside the
/// lock; nothing is queued per change, so nothing grows however fast pages change.
struct PageObservers<Cursor: Hashable & Sendable, Item: Sendable> {
  typealias Handler = @Sendable (PagedSnapshot<Cursor, Item>) -> Void
  /// By identifier: a later observer's is larger, and handlers are called in that order.
  var handlers: [UInt64: Handler] = [:]
  /// What ends an observation when the loadable is deallocated (a stream's finish), by the
  /// identifier of its handler.
  var onEnd: [UInt64: @Sendable () -> Void] = [:]
  /// One thread calls the handlers at a time; a change since it took its snapshot makes it
  /// deliver once more.
  var delivering = RunAgainFlag()
}

extension PagedLoadable {
  /// The first page's status, error and content, and the page loads' statuses and errors.
  public var pagedSnapshot: PagedSnapshot<Cursor, Item> {
    let first = snapshot
    let next = pageState(toward: .next)
    let previous = pageState(toward: .previous)
    return PagedSnapshot(
      status: first.status, error: first.error, content: first.content, nextPageStatus: next.status,
      nextPageError: next.error, previousPageStatus: previous.status, previousPageError: previous.error)
  }

  /// Calls `handler` with the current ``PagedSnapshot``, then after every change of the first
  /// page's status, of the pages, or of a page load's status — one call at a time, never under a
  /// lock. Changes that come while a call runs are delivered together, as one snapshot of the
  /// newest state (a handler sees every state it needs to draw, not every step).
  ///
  /// Observation ends when the returned ``LoadObservation`` is cancelled or deallocated.
  public func observePages(_ handler: @escaping @Sendable (PagedSnapshot<Cursor, Item>) -> Void) -> LoadObservation {
    observePages(handler, onEnd: nil)
  }

  /// ``observePages(_:)``; `onEnd` is called once if the loadable is deallocated while observed.
  func observePages(
    _ handler: @escaping @Sendable (PagedSnapshot<Cursor, Item>) -> Void, onEnd: (@Sendable () -> Void)?
  ) -> LoadObservation {
    let id = nextUniqueID()
    observers.withLock(owner: self) { observers in
      observers.handlers[id] = handler
      if let onEnd { observers.onEnd[id] = onEnd }
    }
    pagesDidChange()
    return LoadObservation { [weak self] in
      guard let self else { return }
      let removed = self.observers.withLock(owner: self) { ($0.handlers.removeValue(forKey: id), $0.onEnd.removeValue(forKey: id)) }
      _ = removed  // released here, outside the lock
    }
  }

  /// ``pagedSnapshot`` after every change, as ``observePages(_:)`` delivers them, in a stream that
  /// keeps the newest one for a reader that falls behind. Ends when the loadable is deallocated or
  /// the iteration ends.
  public var pageUpdates: AsyncStream<PagedSnapshot<Cursor, Item>> {
    let (stream, continuation) = AsyncStream.makeStream(of: PagedSnapshot<Cursor, Item>.self, bufferingPolicy: .bufferingNewest(1))
    let observation = observePages({ continuation.yield($0) }, onEnd: { continuation.finish() })
    continuation.onTermination = { _ in observation.cancel() }
    return stream
  }

  /// Something observers see changed: deliver, or, when another thread delivers, have it deliver
  /// once more.
  func pagesDidChange() {
    let start = observers.withLock(owner: self) { observers -> Bool in
      guard !observers.handlers.isEmpty else { return false }
      return observers.delivering.request()
    }
    guard start else { return }
    while true {
      let handlers = observers.withLock(owner: self) { observers -> [(id: UInt64, handler: PageObservers<Cursor, Item>.Handler)] in
        observers.delivering.beginPass()
        return observers.handlers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
      }
      if !handlers.isEmpty {
        let snapshot = pagedSnapshot
        for (id, handler) in handlers {
          // An observation cancelled since the pass began (by a handler called before it, say) is
          // not called. (A cancel on another thread between this check and the call does not
          // stop that call, as with the engine's observers.)
          guard observers.withLock(owner: self, { $0.handlers[id] != nil }) else { continue }
          handler(snapshot)
        }
      }
      let again = observers.withLock(owner: self) { $0.delivering.endPass() }
      if !again { return }
    }
  }
}
