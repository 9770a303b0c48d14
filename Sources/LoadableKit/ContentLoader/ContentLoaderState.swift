import Synchronization

/// The state of one ``ContentLoader``: the index of entries, the loadables handed out, the idle
/// list, the observers and the delivery queue. A plain value, mutated only under the loader's lock.
///
/// Each key's entry *is* the key's loadable (``ContentLoader/KeyedLoadable``): its status,
/// content, error and attempt live in the loadable's own state. This value adds what a key needs
/// beyond that — claims and their observers, the idle list, the grace timer, staleness — in fields
/// of the entry that only this state touches, under the loader's lock.
///
/// Lock order: the loader's lock may be held while an entry's lock is taken (to add or remove the
/// claims' interest, or to read the entry), never the reverse. Nothing here runs user code or
/// releases a user value: whatever the state lets go of travels in ``Effects`` and dies after the
/// lock is released.
@usableFromInline
struct ContentLoaderState<Key: Hashable & Sendable, Value: Sendable, Version: Comparable & Sendable> {
  @usableFromInline typealias Loader = ContentLoader<Key, Value, Version>
  @usableFromInline typealias Entry = Loader.KeyedLoadable
  typealias Attempt = LoadStateMachine.Attempt
  @usableFromInline typealias Snapshot = Loader.Snapshot
  typealias Event = Loader.Event

  /// A loadable handed out by ``ContentLoader/loadable(for:)``, held weakly: it lives exactly as
  /// long as its users keep it, and the same instance is handed out meanwhile.
  ///
  /// A class, not a struct: Swift 6.3.1 miscompiles reading a struct's `weak` field through an
  /// optional dictionary lookup (`handedOut[key]?.entry` on a missing key read uninitialised
  /// memory and crashed in release builds).
  @usableFromInline
  final class HandedOut {
    weak var entry: Entry?
    let id: ObjectIdentifier

    init(entry: Entry, id: ObjectIdentifier) {
      self.entry = entry
      self.id = id
    }
  }

  // MARK: - Effects

  /// What to do after leaving the lock, in this order: cancel tasks, perform the entries' own
  /// effects, launch attempts, start timers, deliver queued notifications; then let the released
  /// values go.
  ///
  /// Most changes need nothing done (a claim counted, a status already shown), so the lists live
  /// in a ``Storage`` allocated on the first thing recorded: an empty `Effects` is one `nil`
  /// reference, which the library's unspecialized code creates, tests and destroys without
  /// looking up the metadata of six generic element types at run time. In the storage, each list
  /// whose elements' type depends on the loader's generic parameters is created on its first
  /// element, for the same reason: creating, iterating and destroying an empty one looks up the
  /// metadata of its element type (a tuple's: ~460 instructions each).
  @usableFromInline
  struct Effects {
    typealias Storage = ContentLoaderEffectLists

    /// The lists of user values let go of (``Released``), boxed, so that ``Storage`` names no
    /// type that depends on the loader's generic parameters.
    final class ReleasedBox {
      var released = Released()
    }

    /// `nil` until something is recorded.
    var storage: Storage?
    /// Start the idle sweeper, which first wakes at this offset.
    var startSweeper: Duration?
    /// Deliver the outbox: this caller took the delivery role.
    var drain = false

    @inlinable init() {}

    /// The storage, created on first use.
    ///
    /// It and the accessors that record what a key's claim, load and release do are always
    /// inlined: a method of `Effects` called out of line from the library's unspecialized code
    /// takes the metadata of `Effects` itself, which the caller looks up at run time.
    var more: Storage {
      @inline(__always) mutating get {
        if let storage { return storage }
        let storage = Storage()
        self.storage = storage
        return storage
      }
    }

    var cancelTasks: [Task<Void, Never>] {
      get { storage?.cancelTasks ?? [] }
      @inline(__always) _modify { yield &more.cancelTasks }
    }
    /// Effects of an entry's state machine (a cancelled attempt, a restored state).
    var entryEffects: [EntryEffects] {
      get { storage?.entryEffects ?? [] }
      @inline(__always) _modify {
        let storage = more
        if storage.entryEffects == nil { storage.entryEffects = [] }
        yield &storage.entryEffects!
      }
    }
    /// Records what an event of `entry`'s machine returned, to be carried out with these effects,
    /// phase by phase. The loader decided it, and read the key's state under its lock when it did:
    /// the entry need not tell the loader of the change (``KeyedLoadable/statusDidChange()``).
    @inline(__always)
    mutating func record(_ entryEffects: consuming LoadStateMachine.Effects, of entry: Entry) {
      entryEffects.runsStatusHook = false
      self.entryEffects.append(EntryEffects(entry: entry, effects: entryEffects))
    }
    /// Records what an event that can end `entry`'s running attempt decided, if anything.
    @inline(__always)
    mutating func record(_ action: consuming EndAction, of entry: Entry) {
      if case .ended(let entryEffects) = consume action { record(entryEffects, of: entry) }
    }
    /// Attempts started for claims: launched, and their status change delivered.
    var launches: InlineFirstArray<EntryLaunch> {
      get { storage?.launches ?? InlineFirstArray() }
      @inline(__always) _modify {
        let storage = more
        if storage.launches == nil { storage.launches = InlineFirstArray() }
        yield &storage.launches!
      }
    }
    /// Grace timers to start: each key's entry (as an object, see ``EntryEffects``) and its timer.
    var startTimers: [(AnyObject, UInt64)] {
      get { storage?.startTimers ?? [] }
      _modify {
        let storage = more
        if storage.startTimers == nil { storage.startTimers = [] }
        yield &storage.startTimers!
      }
    }
    /// Keys whose load priority changed (and whether it went up); each entry as an object.
    var reprioritized: [(AnyObject, ClaimPriority, Bool)] {
      get { storage?.reprioritized ?? [] }
      _modify {
        let storage = more
        if storage.reprioritized == nil { storage.reprioritized = [] }
        yield &storage.reprioritized!
      }
    }
    /// Loads waiting for `maximumConcurrentLoads` that were given a slot: resumed.
    var grantedSlots: [LoadLimiter.Continuation] {
      get { storage?.grantedSlots ?? [] }
      _modify { yield &more.grantedSlots }
    }
    /// Entries and attempts the state let go of, released with the effects (see ``Released``):
    /// classes, held without their generic types, so that a key let go of or an attempt ended
    /// creates no ``Released``, whose lists' types the library's unspecialized code looks up at
    /// run time (six of them, ~330 instructions each).
    var releasedObjects: ReleasedObjects {
      get { storage?.releasedObjects ?? ReleasedObjects() }
      @inline(__always) _modify { yield &more.releasedObjects }
    }
    var released: Released {
      get { storage?.released.map { unsafeDowncast($0, to: ReleasedBox.self).released } ?? Released() }
      _modify {
        let storage = more
        if storage.released == nil { storage.released = ReleasedBox() }
        yield &unsafeDowncast(storage.released!, to: ReleasedBox.self).released
      }
    }
  }

  /// References the state let go of. Each may be the last one to a user value (a sink holds the
  /// user's closure, a snapshot or a version a user value), so they are destroyed with the
  /// effects, after the lock is released. Entries and attempts (an entry holds its content and
  /// error, an attempt the content before it) go in ``Effects/releasedObjects``.
  struct Released {
    var sinks: [Loader.ClaimSink] = []
    var snapshots: [Snapshot] = []
    var contents: [LoadSnapshot<Value>] = []
    /// Versions a local write let go of.
    var versions: [Version] = []
    /// Version tables a removal let go of (with the prior value).
    var tables: [Loader.Versions] = []
    /// Interim values whose load's result shows now.
    var interims: [Loader.HeldInterim] = []
    /// Keys the table of evicted entries' slots let go of (``evictedSlots``): it may hold a key's
    /// last copy, once the evicted entry was freed.
    var keys: [Key] = []
  }

  // MARK: - State

  let gracePeriod: Duration
  let idleTimeout: Duration?
  let maximumIdleCount: Int
  let totalCostLimit: Int?
  /// The queue of loads for `maximumConcurrentLoads`, if set: a claim's load joins it here.
  let limiter: LoadLimiter?
  /// What the values of the entries in the index cost together.
  var totalCost = 0

  @usableFromInline var index: [Key: Entry] = [:]
  @usableFromInline var handedOut: [Key: HandedOut] = [:]
  /// Some loadable was handed out (never reset): until then a new key needs no look into
  /// ``handedOut``, whose type's metadata the library's unspecialized code looks up at run time.
  @usableFromInline var hasHandedOut = false
  /// The tickets of evicted entries whose abandoned work held the key's slot of the limit when
  /// they were evicted: a new entry for the key takes its ticket, so that its load runs on that
  /// slot instead of waiting behind the key's own abandoned work (SPEC §5). At most twice the
  /// limit: those no longer held are dropped past that (``rememberEvictedSlot(of:_:)``).
  @usableFromInline var evictedSlots: [Key: UInt64] = [:]
  var idle = IdleList()
  var idleEmpty = IdleList()
  var sweeperRunning = false
  var sweeperTask: Task<Void, Never>?
  var eventSinks: [UInt64: AsyncStream<Event>.Continuation] = [:]
  /// `!eventSinks.isEmpty`, kept beside it: asking the dictionary, unspecialized, looks up the
  /// metadata of its element type, on every change of every key.
  var hasEventSinks = false
  /// The notifications of claims' observers and event streams, delivered in order after the lock.
  var outbox = DeliveryQueue<Loader.Delivery>()
  var isShutDown = false

  init(gracePeriod: Duration, idleTimeout: Duration?, maximumIdleCount: Int, totalCostLimit: Int?, limiter: LoadLimiter?) {
    self.totalCostLimit = totalCostLimit
    self.limiter = limiter
    self.gracePeriod = gracePeriod
    self.idleTimeout = idleTimeout
    self.maximumIdleCount = maximumIdleCount
  }

  var count: Int { index.count }

  // MARK: - Entries

  /// The key's entry: the one in the index, or a handed-out loadable, which becomes the entry
  /// again, or `fresh` (made outside the lock), or `nil` when a fresh one must be made.
  ///
  /// Inlinable, with ``insert(_:_:)``: a claim's ``ContentLoader/begin(_:sink:fresh:)`` comes
  /// here, specialized for the caller's types, and looks into and adds to the index without the
  /// run-time metadata look-ups of the dictionary, its optional element and the entry's type that
  /// the library's unspecialized code makes (five, ~330 instructions each, of a new key).
  ///
  /// A key claimed with a fresh entry while no loadable is handed out (a list's new row) is looked
  /// up and inserted through one access to its slot, one hash of the key instead of two.
  @inlinable
  mutating func entry(for key: Key, fresh: Entry?, _ effects: inout Effects) -> Entry? {
    if let fresh, !hasHandedOut {
      if let existing = Self.fill(&index[key], with: fresh) {
        discard(fresh, &effects)
        return existing
      }
      if !evictedSlots.isEmpty { takeEvictedSlot(for: fresh, &effects) }
      indexed(fresh, &effects)
      return fresh
    }
    if let entry = index[key] {
      if let fresh { discard(fresh, &effects) }
      return entry
    }
    if hasHandedOut, let entry = handedOutEntry(for: key) {
      if let fresh { discard(fresh, &effects) }
      insert(entry, &effects)
      return entry
    }
    guard let fresh else { return nil }
    if !evictedSlots.isEmpty { takeEvictedSlot(for: fresh, &effects) }
    insert(fresh, &effects)
    return fresh
  }

  /// `fresh`, a new entry for its key, not yet claimed or handed out, takes the ticket of the
  /// key's evicted entry if that entry's abandoned work still holds the key's slot. The table's
  /// copy of the key goes with the effects: once the evicted entry was freed, it is the last.
  @usableFromInline
  mutating func takeEvictedSlot(for fresh: Entry, _ effects: inout Effects) {
    guard let index = evictedSlots.index(forKey: fresh.key) else { return }
    let (key, ticket) = evictedSlots.remove(at: index)
    effects.released.keys.append(key)
    if limiter?.holds(ticket) == true { fresh.slotTicket = ticket }
  }

  /// `entry` is evicted: when its abandoned work (a load cancelled or superseded, whose work has
  /// not returned) holds the key's slot, its ticket is remembered for the key's next entry
  /// (``takeEvictedSlot(for:_:)``). Past twice the limit, the tickets no longer held are dropped,
  /// their keys with the effects, so that the table holds at most that many (no more keys than
  /// the limit hold a slot).
  mutating func rememberEvictedSlot(of entry: Entry, _ effects: inout Effects) {
    guard let limiter, limiter.holds(entry.slotTicket) else { return }
    // A key already there keeps the table's copy (a dictionary replaces the value only).
    evictedSlots[entry.key] = entry.slotTicket
    guard evictedSlots.count > 2 * limiter.limit else { return }
    let dropped = evictedSlots.filter { !limiter.holds($0.value) }.keys
    for key in dropped {
      if let index = evictedSlots.index(forKey: key) { effects.released.keys.append(evictedSlots.remove(at: index).key) }
    }
  }

  /// Puts `fresh` in an empty `slot`; returns the entry already there, if any.
  @inlinable
  static func fill(_ slot: inout Entry?, with fresh: Entry) -> Entry? {
    if let existing = slot { return existing }
    slot = fresh
    return nil
  }

  /// An entry made for a key that had one meanwhile: released after the lock.
  @usableFromInline
  mutating func discard(_ fresh: Entry, _ effects: inout Effects) {
    effects.releasedObjects.append(fresh)
  }

  /// The loadable handed out for `key` that is still alive, if any. A function of its own: in the
  /// library's unspecialized code, naming the handed-out records' type looks up its metadata at
  /// run time (~335 instructions), which its caller would then do for every new key.
  @usableFromInline @inline(never)
  func handedOutEntry(for key: Key) -> Entry? {
    guard let handed = handedOut[key] else { return nil }
    return handed.entry
  }

  @inlinable
  mutating func insert(_ entry: Entry, _ effects: inout Effects) {
    index[entry.key] = entry
    indexed(entry, &effects)
  }

  /// ``insert(_:_:)`` after the entry went into the index.
  @usableFromInline
  mutating func indexed(_ entry: Entry, _ effects: inout Effects) {
    entry.isInIndex = true
    totalCost += entry.cost
    sync(entry, &effects)
  }

  /// ``ContentLoader/loadable(for:)``: the key's entry, remembered weakly as handed out.
  mutating func handOut(_ key: Key, fresh: Entry?, _ effects: inout Effects) -> Entry? {
    guard let entry = index[key] ?? handedOutEntry(for: key) ?? fresh else { return nil }
    if entry === fresh, !evictedSlots.isEmpty { takeEvictedSlot(for: entry, &effects) }
    handedOut[key] = HandedOut(entry: entry, id: ObjectIdentifier(entry))
    hasHandedOut = true
    entry.wasHandedOut.store(true, ordering: .releasing)
    return entry
  }

  /// A handed-out loadable was deallocated.
  mutating func forget(_ key: Key, id: ObjectIdentifier) {
    if let handed = handedOut[key], handed.id == id { handedOut.removeValue(forKey: key) }
  }

  /// The key's loadable changed (an attempt started or ended, whoever caused it). A loadable that
  /// loads while it is out of the index — evicted, or never claimed — becomes the key's entry
  /// again.
  @usableFromInline
  mutating func changed(_ entry: Entry, now: Duration) -> Effects {
    var effects = Effects()
    guard !isShutDown else { return effects }
    if !entry.isInIndex {
      guard entry.statusMirror.load(ordering: .acquiring) == LoadStatus.loading.code, index[entry.key] == nil,
        (handedOut[entry.key].map { $0.id } ?? ObjectIdentifier(entry)) == ObjectIdentifier(entry)
      else { return effects }
      insert(entry, &effects)
    } else {
      sync(entry, &effects)
    }
    settle(entry, now: now, &effects)
    return effects
  }

  // MARK: - Claims

  /// `begin(key)` on a key that other claims already hold, when nothing but the counts changes:
  /// the entry is claimed, so it is not idle and its claims' interest is in place, and the new
  /// claim does not raise the key's priority. Then the claim is counted (``FastBegin/begun``).
  /// Otherwise nothing is changed, and the answer says whether the loader holds anything for the
  /// key: when it holds nothing (``FastBegin/noEntry``), the caller makes the entry before the
  /// general ``begin(_:sink:fresh:expiredBefore:_:)``, which would otherwise take the lock once
  /// only to find that out.
  ///
  /// Inlinable, so that it runs specialized for the caller's types: no `Effects`, no allocation
  /// and no generic metadata looked up at run time. It must stay what ``begin(_:sink:fresh:expiredBefore:_:)``
  /// does in this case (``settle(_:now:_:)`` has nothing to do for an entry that stays claimed).
  @inlinable
  mutating func beginFast(_ claim: Loader.Claim) -> FastBegin {
    guard let entry = index[claim.key] else {
      return handedOut.isEmpty || handedOut[claim.key] == nil ? .noEntry : .general
    }
    guard entry.claimCount > 0, claim.rank <= entry.claimsAt.highestOrVisible else { return .general }
    entry.claimCount += 1
    entry.claimsAt[claim.rank] += 1
    claim.entry = consume entry  // the look-up's reference, moved: no retain and release of a copy
    return .begun
  }

  /// `Claim.end()` of a claim whose key other claims still hold, when nothing but the counts
  /// changes: no observer of this claim to close, and the key's priority stays. Returns `true`
  /// when done (or when the claim had already ended), `false`, having changed nothing, when the
  /// general ``end(_:now:_:)`` is needed. The entry stays referenced by the other claims, so
  /// letting go of it here releases nothing.
  @inlinable
  mutating func endOnClaimedEntry(_ claim: Loader.Claim) -> Bool {
    guard let entry = claim.entry else { return true }
    guard entry.claimCount > 1, entry.sinks.isEmpty || entry.sinks[claim.id] == nil,
      claim.rank < entry.claimsAt.highestOrVisible || entry.claimsAt[claim.rank] > 1
    else { return false }
    claim.entry = nil
    claim.hasEnded.store(true, ordering: .releasing)
    entry.claimCount -= 1
    entry.claimsAt[claim.rank] -= 1
    return true
  }

  /// `begin(key)`: adds `claim` to the key's entry (``entry(for:fresh:_:)``). The first claim on
  /// an entry that is not freshly loaded starts an attempt that only the claims want; on an entry
  /// that is loading, it adds the claims' interest to the running attempt.
  @usableFromInline
  mutating func begin(_ claim: Loader.Claim, on entry: Entry, expiredBefore: Duration?, _ effects: inout Effects) {
    claim.entry = entry
    entry.claimCount += 1
    let before = entry.loadPriority
    entry.claimsAt[claim.rank] += 1
    if entry.claimCount > 1 { reprioritized(entry, from: before, &effects) }
    if entry.claimCount == 1 {
      if let timer = entry.graceTimer {
        entry.graceTimer = nil
        if let task = timer.task { effects.cancelTasks.append(task) }
      }
      if entry.held == nil {
        let isLoaded = entry.statusMirror.load(ordering: .acquiring) == LoadStatus.loaded.code
        // A refreshed key refreshes its dependencies too; a value that only got old asks them
        // for theirs if needed.
        let intent: LoadIntent? =
          !isLoaded ? .load : entry.isStale ? .refresh : entry.isExpired(before: expiredBefore) ? .ifNeeded : nil
        // A load already under way that the claim joined (a dependent's, a plain caller's) is
        // ranked by its first claim too, and its task raised to it: `before`, read with no claims,
        // says nothing of the rank it runs at. (A loaded key's claim joins nothing: nothing to do.)
        if !addInterest(entry, starting: intent, &effects) && entry.held != nil { rankAnew(entry, &effects) }
      } else {
        // Back within the grace period: the load's place kept the rank of the claims that ended.
        rankAnew(entry, &effects)
      }
    }
    settle(entry, now: .zero, &effects)  // claimed: the entry cannot go idle here
  }

  /// A claim just begun on `entry` (``begin(_:on:expiredBefore:_:)``, under the same lock) gets its
  /// observer, whose first delivery is the key's snapshot. A function of its own: the sink's and
  /// the delivery's types, named in the library's unspecialized code, are looked up at run time,
  /// which a claim without an observer need not pay.
  @usableFromInline
  mutating func observe(_ claim: Loader.Claim, on entry: Entry, with sink: Loader.Sink, _ effects: inout Effects) {
    // What the key did that was not told yet goes to the observers that were there (the new one's
    // first snapshot shows the key as it is now, after it). A load's end and the next one's start
    // read at once are told as two (`EndBefore`): told after this first snapshot, the end would
    // reach the new observer out of order. (Only another thread reaches that window: a loader call
    // or a status hook on this one syncs first; no deterministic test does.)
    sync(entry, &effects)
    entry.sinks[claim.id] = [Loader.ClaimSink(id: nextUniqueID(), sink: sink)]
    entry.hasSinks = true
    enqueue(.snapshot(sink, snapshot(of: entry, &effects), first: true), &effects)
  }

  /// `Claim.end()`: idempotent. The last claim's end removes the claims' interest in the running
  /// attempt (after the grace period), which cancels it when only the claims wanted it. Returns
  /// the entry the claim held, to be released after the lock.
  @usableFromInline
  mutating func end(_ claim: Loader.Claim, now: Duration, _ effects: inout Effects) -> Entry? {
    guard let entry = claim.entry else { return nil }
    claim.entry = nil
    claim.hasEnded.store(true, ordering: .releasing)
    entry.claimCount -= 1
    let before = entry.loadPriority
    entry.claimsAt[claim.rank] -= 1
    if entry.claimCount > 0 { reprioritized(entry, from: before, &effects) }
    if entry.hasSinks { closeSinks(of: claim, on: entry, &effects) }
    if entry.claimCount == 0 {
      entry.refreshPending = false
      if entry.held != nil {
        if gracePeriod <= .zero {
          removeInterest(entry, &effects)
        } else if entry.graceTimer == nil {
          let id = nextUniqueID()
          entry.graceTimer = Loader.GraceTimer(id: id)
          effects.startTimers.append((entry, id))
        }
      }
    }
    if entry.isInIndex { settle(entry, now: now, &effects) }
    return entry
  }

  /// Closes the observers of an ending claim. A function of its own, for the reason
  /// ``handedOutEntry(for:)`` is: most claims have none.
  @inline(never)
  private mutating func closeSinks(of claim: Loader.Claim, on entry: Entry, _ effects: inout Effects) {
    guard let sinks = entry.sinks.removeValue(forKey: claim.id) else { return }
    for sink in sinks { close(sink.sink, &effects) }
    effects.released.sinks.append(contentsOf: sinks)
    entry.hasSinks = !entry.sinks.isEmpty
  }

  /// `claim.priority = priority`: the key's load runs at the highest priority among its claims.
  mutating func setPriority(_ claim: Loader.Claim, to priority: ClaimPriority, _ effects: inout Effects) {
    let old = claim.rank
    claim.rank = priority
    guard let entry = claim.entry, old != priority else { return }
    let before = entry.loadPriority
    entry.claimsAt[old] -= 1
    entry.claimsAt[priority] += 1
    reprioritized(entry, from: before, &effects)
  }

  mutating func attachTimer(_ task: Task<Void, Never>, to entry: Entry, id: UInt64) -> Bool {
    guard entry.graceTimer?.id == id else { return true }
    entry.graceTimer!.task = task
    return false
  }

  /// The grace period after the last claim ended is over.
  mutating func graceExpired(_ entry: Entry, id: UInt64, now: Duration) -> Effects {
    var effects = Effects()
    guard entry.graceTimer?.id == id else { return effects }
    entry.graceTimer = nil
    if entry.claimCount == 0 && entry.held != nil { removeInterest(entry, &effects) }
    if entry.isInIndex { settle(entry, now: now, &effects) }
    return effects
  }

  /// Adds the claims' interest to the entry's running attempt, or starts one with `intent`.
  /// Returns whether it started one.
  @discardableResult
  mutating func addInterest(_ entry: Entry, starting intent: LoadIntent?, _ effects: inout Effects) -> Bool {
    let outcome = entry.addInterest(starting: intent)
    ContentLoaderSeams.afterInterestAdded.current?()
    entry.held = outcome.held
    if let started = outcome.started {
      reserveSlot(for: entry, attempt: started)
      effects.launches.append(EntryLaunch(entry: entry, attempt: started, event: outcome.event))
    }
    if outcome.held != nil { sync(entry, &effects) }
    if let started = outcome.started { givePlaceBackIfEnded(entry, started, &effects) }
    return outcome.started != nil
  }

  /// Removes the claims' interest; the entry goes back to how it was before an attempt that only
  /// the claims wanted.
  mutating func removeInterest(_ entry: Entry, _ effects: inout Effects) {
    guard let held = entry.held else { return }
    entry.held = nil
    effects.record(entry.removeInterest(from: held), of: entry)
    effects.releasedObjects.append(held)
    sync(entry, &effects)
    // The claims' rank went with them: a load that goes on for whoever else waits for it drops
    // back to their demand.
    if limiter != nil && entry.waiting != nil {
      let priority = entry.loadPriority
      entry.demandVersion &+= 1
      effects.grantedSlots.append(contentsOf: limiter!.reprioritize(entry.slotTicket, to: priority))
      effects.reprioritized.append((entry, priority, false))
    }
  }

  // MARK: - Shutting down

  /// The loader is being deallocated (so no claim is left): cancels the timers, removes the
  /// claims' interest left for a grace period, finishes the event streams and drops every entry.
  /// Loadables handed out keep working on their own.
  mutating func shutdown() -> Effects {
    var effects = Effects()
    isShutDown = true
    if let task = sweeperTask { effects.cancelTasks.append(task) }
    sweeperTask = nil
    for entry in index.values {
      if let task = entry.graceTimer?.task { effects.cancelTasks.append(task) }
      entry.graceTimer = nil
      removeInterest(entry, &effects)
      entry.older = nil
      entry.newer = nil
      entry.isIdleLinked = false
      entry.isInIndex = false
      effects.releasedObjects.append(entry)
    }
    index.removeAll()
    handedOut.removeAll()
    idle = IdleList()
    idleEmpty = IdleList()
    totalCost = 0
    for sink in eventSinks.values { enqueue(.finishEvents(sink), &effects) }
    eventSinks.removeAll()
    hasEventSinks = false
    return effects
  }
}

/// What ``ContentLoaderState/beginFast(_:)`` found.
@usableFromInline
enum FastBegin {
  /// The claim is counted: nothing else to do.
  case begun
  /// The general path is needed.
  case general
  /// The loader holds nothing for the key: the general path needs a new entry.
  case noEntry
}
