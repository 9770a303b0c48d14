/// The idle list and eviction: entries without claims that are not loading, least recently used
/// first, bounded by `maximumIdleCount` and, with an idle timeout, by time.
extension ContentLoaderState {
  mutating func linkIdle(_ entry: Entry, now: Duration) {
    // Offsets are read before the lock, so two callers may arrive out of order: keep the list
    // sorted by never going back in time.
    entry.idleSince = max(now, newestIdle?.idleSince ?? now)
    entry.older = newestIdle
    entry.newer = nil
    if let newest = newestIdle { newest.newer = entry } else { oldestIdle = entry }
    newestIdle = entry
    entry.isIdleLinked = true
    idleCount += 1
  }

  mutating func unlinkIdle(_ entry: Entry) {
    if let older = entry.older { older.newer = entry.newer } else { oldestIdle = entry.newer }
    if let newer = entry.newer { newer.older = entry.older } else { newestIdle = entry.older }
    entry.older = nil
    entry.newer = nil
    entry.isIdleLinked = false
    idleCount -= 1
  }

  /// Removes an idle entry from the index. The loader's reference is released after the lock; the
  /// entry's value goes with it unless somebody still holds the key's loadable, which keeps
  /// working and becomes the entry again when it loads or is claimed.
  mutating func evict(_ entry: Entry, _ effects: inout Effects) {
    unlinkIdle(entry)
    index.removeValue(forKey: entry.key)
    entry.isInIndex = false
    effects.released.entries.append(entry)
    emit(.evicted(entry.key), &effects)
  }

  /// The sweeper woke: evicts the entries idle for `idleTimeout` or longer. Returns when to wake
  /// next, or `nil` when the idle list is empty and the sweeper stops.
  mutating func sweep(now: Duration) -> (next: Duration?, Effects) {
    var effects = Effects()
    guard let timeout = idleTimeout, !isShutDown else {
      sweeperRunning = false
      sweeperTask = nil
      return (nil, effects)
    }
    while let oldest = oldestIdle, oldest.idleSince + timeout <= now { evict(oldest, &effects) }
    guard let oldest = oldestIdle else {
      sweeperRunning = false
      sweeperTask = nil
      return (nil, effects)
    }
    return (oldest.idleSince + timeout, effects)
  }

  /// Stores the sweeper's task; returns `true` when the loader shut down meanwhile.
  mutating func attachSweeper(_ task: Task<Void, Never>) -> Bool {
    if isShutDown { return true }
    sweeperTask = task
    return false
  }
}
