/// Local writes: a value the app already has, set on a key as a load's result would be.
extension ContentLoaderState {
  /// `set(value, version:, for: key)`: under the version rule, the value becomes the key's
  /// content; a running load is superseded (its task cancelled, its waiters answered with the
  /// value, its result dropped). Returns whether the value was written, or `nil` when the key has
  /// no entry and `fresh` is `nil` (the caller makes one outside the lock and comes back).
  mutating func write(
    _ key: Key, value: Value, version: Version, cost: Int, loadedAt: Duration, now: Duration, fresh: Entry?,
    _ effects: inout Effects
  ) -> Bool? {
    guard !isShutDown else { return false }
    guard let entry = entry(for: key, fresh: fresh, &effects) else { return nil }
    // What the key did that was not told yet — a load that ended just before, whose status hook
    // has not run — is told first: the write is a change of its own. (A refresh asked for before
    // does not start here: the written value is newer than it, if it is taken.)
    if entry.isInIndex {
      let pending = entry.refreshPending
      entry.refreshPending = false
      sync(entry, &effects)
      entry.refreshPending = pending
    }
    guard let (entryEffects, dropped, droppedInterim) = entry.write(value, version: version, cost: cost, now: loadedAt)
    else {
      if entry.isInIndex { settle(entry, now: now, &effects) }
      return false
    }
    effects.released.versions.append(contentsOf: dropped)
    if let droppedInterim { effects.released.interims.append(droppedInterim) }
    // The written value is newer than any refresh asked for before it.
    entry.isStale = false
    entry.refreshPending = false
    entry.wrote = true
    effects.record(entryEffects, of: entry)
    sync(entry, &effects)
    settle(entry, now: now, &effects)
    return true
  }
}
