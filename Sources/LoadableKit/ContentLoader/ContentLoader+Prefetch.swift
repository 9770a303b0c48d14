import Synchronization

extension ContentLoader {
  /// Claims `keys` at ``ClaimPriority/prefetch``, so that they load ahead of being shown, never
  /// before a visible row, and returns the handle that holds those claims.
  ///
  /// ```swift
  /// let ahead = thumbnails.prefetch(upcomingIDs)        // as the list approaches them
  /// ahead.cancel(idsThatScrolledOutOfRange)             // as it moves on
  /// ```
  ///
  /// The prefetch ends for every key when the handle is cancelled or deallocated. A key that
  /// appears on screen meanwhile gets its own visible claim; the two share one load, at the
  /// higher priority.
  public func prefetch(_ keys: some Sequence<Key>) -> Prefetch {
    let handle = Prefetch(loader: self)
    handle.add(keys)
    return handle
  }

  /// Claims held for prefetching, made by ``ContentLoader/prefetch(_:)``.
  public final class Prefetch: Sendable {
    let loader: ContentLoader
    private let claims = Mutex<[Key: Claim]>([:])

    init(loader: ContentLoader) {
      self.loader = loader
    }

    deinit {
      cancel()
    }

    /// Prefetches more keys; keys already prefetched are left as they are.
    public func add(_ keys: some Sequence<Key>) {
      for key in keys where !contains(key) {
        let claim = loader.begin(key, priority: .prefetch)
        let replaced = claims.withLock(owner: self) { $0.updateValue(claim, forKey: key) }
        replaced?.end()  // another thread added the same key meanwhile
      }
    }

    /// Whether `key` is being prefetched by this handle.
    public func contains(_ key: Key) -> Bool {
      claims.withLock(owner: self) { $0[key] != nil }
    }

    /// Stops prefetching `keys`: a load that only the prefetch wanted is cancelled, or never
    /// starts when it still waits for `maximumConcurrentLoads`.
    public func cancel(_ keys: some Sequence<Key>) {
      let keys = Array(keys)  // a lazy sequence's closures are user code: not under the lock
      let ended = claims.withLock(owner: self) { claims in keys.compactMap { claims.removeValue(forKey: $0) } }
      for claim in ended { claim.end() }
    }

    /// Stops prefetching every key.
    public func cancel() {
      let ended = claims.withLock(owner: self) { claims in
        defer { claims.removeAll() }
        return Array(claims.values)
      }
      for claim in ended { claim.end() }
    }
  }
}
