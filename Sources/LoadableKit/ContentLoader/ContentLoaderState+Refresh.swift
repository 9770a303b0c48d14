/// Refreshing and invalidating keys: a claimed key loads again (after its running load), an idle
/// one is marked stale for its next first claim.
extension ContentLoaderState {
  /// `refresh(key)`: the value is out of date. A claimed entry loads again at once, or, when an
  /// attempt is running (it may predate the change), as soon as that attempt ends. An idle one is
  /// marked stale and loads at its next first claim (or its loadable's next `fetchIfNeeded()`).
  mutating func refresh(_ key: Key) -> Effects {
    var effects = Effects()
    if let entry = index[key] { refresh(entry, &effects) }
    return effects
  }

  /// `refreshAll()`: ``refresh(_:)`` for every entry. O(n).
  mutating func refreshAll() -> Effects {
    var effects = Effects()
    for entry in index.values { refresh(entry, &effects) }
    return effects
  }

  /// `refresh(where:)` (`loading`) and `invalidate(where:)`, for the keys the predicate chose.
  mutating func refresh(_ keys: [Key], loading: Bool) -> Effects {
    var effects = Effects()
    for key in keys {
      guard let entry = index[key] else { continue }
      if loading {
        refresh(entry, &effects)
      } else {
        entry.isStale = true
        entry.refreshMark = makeID()
      }
    }
    return effects
  }

  mutating func refresh(_ entry: Entry, _ effects: inout Effects) {
    entry.isStale = true
    entry.refreshMark = makeID()
    guard entry.claimCount > 0 else { return }
    ContentLoaderSeams.beforeRefreshActs?()
    // One step under the key's lock decides, not a status read before it: with no load running,
    // one starts now; a running one — whoever started it, and maybe before the change — gets the
    // claims' interest, and another load follows it.
    let previous = entry.held
    entry.held = nil
    // Pending before the step: if the running load ends within it (on another thread, between
    // the interest and the read of the key), the read finds the refresh pending and starts it.
    entry.refreshPending = true
    if addInterest(entry, starting: .refresh, &effects) { entry.refreshPending = false }
    if let previous {
      // The claims' interest moved on (to the same attempt, when it still runs: added, then removed).
      effects.entryEffects.append((entry, entry.removeInterest(from: previous)))
      effects.released.attempts.append(previous)
    }
  }
}
