extension ContentLoader {
  /// Sets a value the app already has — after the user edited an item, its new title or
  /// thumbnail — as `key`'s value, as if a load had returned it.
  ///
  /// The version rule holds as for a load's result: a `version` older than or equal to the
  /// version of the value the key holds (a loaded value, or the prior value from the
  /// `existingValue` hook) is refused, and nothing changes. A value written is delivered to the
  /// key's claims (``LoadStatus/loaded``, with the value and version) and to ``events``
  /// (``Event/loaded(_:_:_:)``), and becomes the content of the key's ``loadable(for:)``. The key
  /// is fresh again: a refresh or an invalidation asked for before the write is forgotten.
  ///
  /// A load running for the key may return data from before the write: it is *superseded*. Its
  /// task is cancelled and its result, if it still comes, is dropped, whatever its version; the
  /// callers waiting on the key's loadable get the written value, as if the load had returned it
  /// (none of them is failed or cancelled).
  ///
  /// The key need not be claimed: a key without an entry gets one (the `existingValue` hook is
  /// called for it, outside the lock), which is idle and evicted as any idle entry is. The data
  /// source is not called.
  ///
  /// - Parameters:
  ///   - value: The value.
  ///   - version: Its version.
  ///   - key: The key.
  /// - Returns: `true` when the value was written, `false` when the version rule refused it.
  /// - Complexity: O(1); the `cost` closure, if any, is called once, outside the lock.
  @discardableResult
  public func set(_ value: Value, version: Version, for key: Key) -> Bool {
    let valueCost = keySource.cost?(value) ?? 0
    let loadedAt = keySource.clock?.now() ?? .zero
    let now = currentTime()
    var fresh: KeyedLoadable?
    while true {
      let (written, effects) = withState { [fresh] state -> (Bool?, State.Effects) in
        var effects = State.Effects()
        let written = state.write(
          key, value: value, version: version, cost: valueCost, loadedAt: loadedAt, now: now, fresh: fresh, &effects)
        return (written, effects)
      }
      perform(consume effects)
      if let written { return written }
      fresh = makeEntry(key)
    }
  }
}
