extension ContentLoader {
  /// Drops what the loader holds for `key`: its value — loaded, written with
  /// ``set(_:version:for:)``, or the prior value from `existingValue` — and its error.
  ///
  /// - A key that nobody claims and that is not loading is evicted (``Event/evicted(_:)``): its
  ///   next claim makes a new entry, which asks the `existingValue` hook again.
  /// - A claimed key loads again **at once**: its claims see ``LoadStatus/loading`` without a
  ///   value (``Event/loading(_:)``), as at the key's first load, then the load's result. The
  ///   `existingValue` hook is not asked again.
  /// - A running load — it may return the data being dropped — is superseded: a fresh load takes
  ///   its place, its claims and the callers waiting on the key's loadable wait for the fresh one
  ///   (none is failed), and its result, if it still comes, is dropped whatever its version.
  ///
  /// The key's ``loadable(for:)`` is the entry: a holder of it sees its content go too. Does
  /// nothing for a key the loader holds nothing for.
  ///
  /// - Complexity: O(1).
  public func remove(_ key: Key) {
    let now = currentTime()
    perform(withState { $0.remove(key, now: now) })
  }

  /// Evicts every idle entry at once — every entry without claims and not loading — as when
  /// the system warns of memory pressure. Claimed and loading keys are kept. A holder of an
  /// evicted key's ``loadable(for:)`` keeps it working, with its content, as after any eviction.
  ///
  /// - Returns: How many entries were evicted.
  /// - Complexity: O(n) in the number of idle entries.
  @discardableResult
  public func removeAllIdle() -> Int {
    let (removed, effects) = withState { $0.removeAllIdle() }
    perform(consume effects)
    return removed
  }
}
