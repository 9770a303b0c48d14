/// Removal: one key's value dropped, or every idle entry at once (a memory warning).
extension ContentLoaderState {
  /// `remove(key)`: the key's value — loaded, written, or the prior value — is dropped. A key
  /// nobody claims and nothing loads is evicted. A claimed key loads again at once, its claims
  /// seeing ``LoadStatus/loading`` without a value; a running load is superseded by a fresh one
  /// (its waiters and claims wait for that one, its result is dropped).
  mutating func remove(_ key: Key, now: Duration) -> Effects {
    var effects = Effects()
    guard !isShutDown, let entry = index[key] ?? handedOutEntry(for: key) else { return effects }
    // What the key did that was not told yet (a load that ended just before) is told first: the
    // removal is a change of its own. (A refresh asked for before is dropped by the removal.)
    if entry.isInIndex {
      entry.refreshPending = false
      sync(entry, &effects)
    }
    let (action, table) = entry.forgetAll()
    effects.released.tables.append(table)
    entry.isStale = false
    entry.refreshPending = false
    switch action {
    case .superseded(let fresh, let superseded, let forgetEffects):
      if entry.held === superseded { entry.held = fresh }
      effects.releasedObjects.append(superseded)
      effects.record(forgetEffects, of: entry)
      guard entry.isInIndex else {
        effects.launches.append(EntryLaunch(entry: entry, attempt: fresh, event: nil))
        return effects
      }
      reserveSlot(for: entry, attempt: fresh)
      effects.launches.append(EntryLaunch(entry: entry, attempt: fresh, event: nil))
      ContentLoaderSeams.afterLoadSuperseded.current?()
      entry.forgot = true
      sync(entry, &effects)
      entry.forgot = false
      givePlaceBackIfEnded(entry, fresh, &effects)
      return effects
    case .cleared(let forgetEffects):
      effects.record(forgetEffects, of: entry)
    }
    guard entry.isInIndex else { return effects }
    entry.forgot = true
    if entry.claimCount > 0 {
      let previous = entry.held
      entry.held = nil
      addInterest(entry, starting: .load, &effects)
      if let previous {
        effects.record(entry.removeInterest(from: previous), of: entry)
        effects.releasedObjects.append(previous)
      }
    }
    sync(entry, &effects)
    entry.forgot = false
    settle(entry, now: now, &effects)
    if entry.isIdleLinked { evict(entry, &effects) }
    return effects
  }

  /// `removeAllIdle()`: evicts every idle entry — without claims, not loading. Returns how many.
  mutating func removeAllIdle() -> (Int, Effects) {
    var effects = Effects()
    var removed = 0
    while let oldest = idleEmpty.oldest ?? idle.oldest {
      evict(oldest, &effects)
      removed += 1
    }
    return (removed, effects)
  }
}
