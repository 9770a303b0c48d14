/// Releases the links of a long chain one after the other instead of one inside the other.
///
/// Releasing the end of a 100,000-deep `map` chain would otherwise run 100,000 nested `deinit`s —
/// each one releasing its source from inside its own — and overflow the stack. A loadable's
/// `deinit` hands what links it to other loadables (its sources, its declared dependencies) to
/// this thread's queue instead, and the outermost `deinit` on the thread releases its own links
/// and then the queue in a loop: a source released there may queue its own sources, which the
/// same loop then releases. The stack depth stays constant whatever the length of the chain.
///
/// The queue is per thread, and only used from a `deinit`, which runs synchronously on one thread.
enum DeferredRelease {
  /// Queues `links` to be released after the current `deinit` (and the ones it causes) returned.
  static func release(_ links: consuming Any) {
    PerThread.current.pointee.releaseQueue.append(links)
  }

  /// Releases `links` and then the queued links, unless an outer `deinit` on this thread is
  /// already doing so: then `links` joins the queue, and that `deinit`'s loop releases it.
  ///
  /// The outermost call releases `links` itself, without queuing it: a loadable released on its
  /// own (no chain behind it) allocates nothing here. The `deinit`s that `links` runs find the
  /// queue draining and queue their own links, so the depth is two at most.
  static func releaseAndDrain(_ links: consuming Any) {
    let thread = PerThread.current
    guard !thread.pointee.isReleasing else {
      thread.pointee.releaseQueue.append(links)
      return
    }
    thread.pointee.isReleasing = true
    _ = consume links  // may run more deinits, which queue more links
    drain(thread)
  }

  /// Lets go of a link by `letGo` as ``releaseAndDrain(_:)`` does, but without the link as an
  /// `Any` unless a release already runs on this thread (then `queued` hands it over, and the
  /// loop of that release lets go of it): an unspecialized generic caller — a loadable's
  /// `deinit` — then looks up no metadata and boxes nothing in the usual case, a link that is no
  /// chain's.
  @inline(__always)
  static func releaseOutermost(_ letGo: () -> Void, queued: () -> Any) {
    let thread = PerThread.current
    guard !thread.pointee.isReleasing else {
      thread.pointee.releaseQueue.append(queued())
      return
    }
    thread.pointee.isReleasing = true
    letGo()  // may run more deinits, which queue more links
    drain(thread)
  }

  /// Lets go of the links queued on `thread`, one after the other (each may queue more), and ends
  /// the thread's release.
  @inline(__always)
  private static func drain(_ thread: UnsafeMutablePointer<PerThread>) {
    while let links = thread.pointee.releaseQueue.popLast() {
      _ = consume links
    }
    thread.pointee.releaseQueue = []
    thread.pointee.isReleasing = false
  }
}
