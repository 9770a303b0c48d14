/// The idle lists and eviction: entries without claims that are not loading, least recently used
/// first, bounded by `maximumIdleCount` and, with an idle timeout, by time.
///
/// Idle entries with nothing to show — never loaded, no prior value, or a load that was
/// cancelled before it produced one — are on a list of their own and evicted first, so a fling
/// through keys that never loaded does not push the real thumbnails out of memory.
extension ContentLoaderState {
  /// A doubly linked list of idle entries through their `newer`/`older` fields.
  struct IdleList {
    var oldest: Entry?
    var newest: Entry?
    var count = 0
  }

  var idleCount: Int { idle.count + idleEmpty.count }

  /// Whether the entry has a value to show: content, a prior value, or an interim value.
  func hasValue(_ entry: Entry) -> Bool {
    if entry.shown.contentVersion > 0 { return true }
    guard entry.cameWithPrior || entry.hasInterimMark.load(ordering: .acquiring) else { return false }
    return holdsPriorOrInterim(entry)
  }

  /// Whether the entry's versions hold a prior or an interim value: in a function of its own, so
  /// that ``hasValue(_:)`` looks up their types' metadata only for an entry that may hold one.
  @inline(never)
  private func holdsPriorOrInterim(_ entry: Entry) -> Bool {
    entry.withVersions { $0.prior != nil || $0.interim != nil }
  }

  mutating func linkIdle(_ entry: Entry, now: Duration) {
    entry.isIdleEmpty = !hasValue(entry)
    if entry.isIdleEmpty { Self.link(entry, into: &idleEmpty, now: now) } else { Self.link(entry, into: &idle, now: now) }
    entry.isIdleLinked = true
  }

  mutating func unlinkIdle(_ entry: Entry) {
    if entry.isIdleEmpty { Self.unlink(entry, from: &idleEmpty) } else { Self.unlink(entry, from: &idle) }
    entry.isIdleLinked = false
  }

  private static func link(_ entry: Entry, into list: inout IdleList, now: Duration) {
    // Offsets are read before the lock, so two callers may arrive out of order: keep the list
    // sorted by never going back in time.
    entry.idleSince = max(now, list.newest?.idleSince ?? now)
    entry.older = list.newest
    entry.newer = nil
    if let newest = list.newest { newest.newer = entry } else { list.oldest = entry }
    list.newest = entry
    list.count += 1
  }

  private static func unlink(_ entry: Entry, from list: inout IdleList) {
    if let older = entry.older { older.newer = entry.newer } else { list.oldest = entry.newer }
    if let newer = entry.newer { newer.older = entry.older } else { list.newest = entry.older }
    entry.older = nil
    entry.newer = nil
    list.count -= 1
  }

  /// Evicts beyond `maximumIdleCount`, entries with nothing to show first.
  mutating func evictBeyondCount(_ effects: inout Effects) {
    while idleCount > maximumIdleCount, let oldest = idleEmpty.oldest ?? idle.oldest { evict(oldest, &effects) }
  }

  /// Evicts idle entries while the total cost is over the limit, entries with nothing to show
  /// first, then the least recently used.
  mutating func evictBeyondCost(_ effects: inout Effects) {
    guard let limit = totalCostLimit else { return }
    while totalCost > limit, let oldest = idleEmpty.oldest ?? idle.oldest { evict(oldest, &effects) }
  }

  /// The entry idle the longest, on either list.
  var oldestIdle: Entry? {
    switch (idle.oldest, idleEmpty.oldest) {
    case (let a?, let b?): a.idleSince <= b.idleSince ? a : b
    case (let a, let b): a ?? b
    }
  }

  /// Removes an idle entry from the index. The loader's reference is released after the lock; the
  /// entry's value goes with it unless somebody still holds the key's loadable, which keeps
  /// working and becomes the entry again when it loads or is claimed.
  mutating func evict(_ entry: Entry, _ effects: inout Effects) {
    unlinkIdle(entry)
    entry.source.specialized.removeFromIndex(&index, entry.key)
    entry.isInIndex = false
    totalCost -= entry.cost
    if limiter != nil { rememberEvictedSlot(of: entry, &effects) }
    effects.releasedObjects.append(entry)
    // No event built for a loader nobody listens to: in the library's unspecialized code, making
    // one (and walking the empty list of streams) looks up the types of the event, the delivery
    // and the stream at run time, on every eviction — and so does a function that names the
    // event, even on a path it does not take: it is built in a function of its own.
    if hasEventSinks { emitEvicted(entry.key, &effects) }
  }

  @inline(never)
  private mutating func emitEvicted(_ key: Key, _ effects: inout Effects) {
    emit(.evicted(key), &effects)
  }

  /// The sweeper woke: evicts the entries idle for `idleTimeout` or longer. Returns when to wake
  /// next, or `nil` when the idle lists are empty and the sweeper stops.
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
