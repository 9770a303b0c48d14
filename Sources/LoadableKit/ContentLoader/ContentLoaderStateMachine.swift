import Synchronization

/// The state of one ``ContentLoader``: every key's entry, the idle list, the observers and the
/// delivery queue. A plain value, mutated only under the loader's lock.
///
/// Every event is a `mutating` method that changes the state and returns ``Effects``: what the
/// loader must do once the lock is released — start or cancel tasks, resume waiting loadable
/// attempts, nudge a loadable, deliver queued notifications, and release evicted values (whose
/// `deinit` is user code). It never runs user code, never suspends and never reads the clock: the
/// caller reads the time before taking the lock and passes it in.
///
/// Every operation is O(1) (amortized, hashing a key at most once) except ``refreshAll()``,
/// ``shutdown()`` and the fan-out of a change to the observers that receive it.
struct ContentLoaderStateMachine<Key: Hashable & Sendable, Value: Sendable, Version: Comparable & Sendable> {
  typealias Loader = ContentLoader<Key, Value, Version>
  typealias Snapshot = Loader.Snapshot
  typealias Event = Loader.Event
  typealias Prior = (value: Value, version: Version)
  typealias LoadResult = Result<(value: Value, version: Version), any Error>
  /// A loadable's attempt waiting in ``Loader/KeyedLoadable/performLoad()`` for a load's outcome.
  typealias Waiter = UnsafeContinuation<Result<Value, any Error>, Never>

  /// Whether the data source's `existingValue` hook has been asked, outside the lock, yet.
  enum PriorLookup: Sendable {
    case notFetched
    case fetched(Prior?)
  }

  // MARK: - Observers

  /// A per-claim handler; switched off when its claim ends, so a notification still queued for it
  /// is not delivered after `end()` (one already being delivered may finish).
  final class Handler: Sendable {
    let call: @Sendable (Snapshot) -> Void
    let isActive = Atomic<Bool>(true)
    init(_ call: @escaping @Sendable (Snapshot) -> Void) { self.call = call }
  }

  /// Where a claim's snapshots go.
  enum Sink: Sendable {
    case stream(AsyncStream<Snapshot>.Continuation)
    case handler(Handler)
  }

  struct ClaimSink: Sendable {
    var id: UInt64
    var sink: Sink
  }

  /// A notification, queued under the lock in the order of the changes and delivered outside it.
  enum Delivery: Sendable {
    case snapshot(Sink, Snapshot)
    case finish(AsyncStream<Snapshot>.Continuation)
    case event(AsyncStream<Event>.Continuation, Event)
    case finishEvents(AsyncStream<Event>.Continuation)
  }

  // MARK: - Entries

  /// One running load of a key. Its result is used only while it is the entry's current or
  /// superseded load; a cancelled load's result is dropped.
  struct Load: Sendable {
    let id: UInt64
    var task: Task<Void, Never>?
  }

  struct GraceTimer: Sendable {
    let id: UInt64
    var task: Task<Void, Never>?
  }

  struct LoadWaiter: Sendable {
    let id: UInt64
    /// The attempt was made by a caller of the loadable rather than by the loader mirroring a
    /// load into it: it keeps the load alive, as a claim does.
    let isOwner: Bool
    let continuation: Waiter
  }

  /// The state of one key. A class so that claims and tasks can point at it without hashing the
  /// key again, and so that the idle list can link entries. Touched only under the loader's lock.
  final class Entry: @unchecked Sendable {
    let key: Key
    var status: LoadStatus = .notLoaded
    var value: Value?
    var version: Version?
    /// The last load's error; meaningful only while `status == .failed`, kept across a load so a
    /// cancelled load can restore it.
    var error: (any Error)?
    /// `refresh` asked for a new value; the next first claim loads even when `status == .loaded`.
    var isStale = false
    /// The last ID issued when `refresh` was called: only a load with a larger ID started after
    /// it, and only such a load's success clears `isStale`.
    var staleAsOf: UInt64 = 0
    /// What a cancelled load goes back to.
    var statusBeforeLoad: LoadStatus = .notLoaded
    var errorBeforeLoad: (any Error)?
    /// The load whose outcome sets the status; non-`nil` exactly when `status == .loading`.
    var current: Load?
    /// A load that a refresh replaced while it ran; its result is kept only when it is newer.
    var superseded: Load?
    /// The active claims and their observers.
    var claims: [UInt64: [ClaimSink]] = [:]
    /// Loadable attempts waiting for the current load.
    var waiters: [LoadWaiter] = []
    /// How many of `waiters` keep the load alive.
    var owners = 0
    var graceTimer: GraceTimer?
    /// Changes at every outcome (loaded, failed, cancelled), from a loader-wide counter, so a
    /// loadable can tell whether it has seen the latest outcome even across evictions.
    var generation: UInt64 = 0
    /// `false` once evicted: a detached entry is never looked at again.
    var isInIndex = true
    // The idle list (least recently used first).
    var isIdleLinked = false
    var idleSince: Duration = .zero
    var newer: Entry?
    var older: Entry?

    init(key: Key, prior: Prior?) {
      self.key = key
      self.value = prior?.value
      self.version = prior?.version
    }

    var isLoading: Bool { current != nil || superseded != nil }
    var isInterested: Bool { !claims.isEmpty || owners > 0 }

    var snapshot: Snapshot {
      Snapshot(key: key, status: status, value: value, version: version, error: status == .failed ? error : nil)
    }
  }

  /// The loadable handed out by ``ContentLoader/loadable(for:)`` for a key, held weakly so that
  /// it lives exactly as long as its users keep it.
  struct LoadableRecord: Sendable {
    weak var loadable: Loader.KeyedLoadable?
    let id: ObjectIdentifier
    /// The entry generation whose outcome the loadable has taken.
    var consumed: UInt64 = 0
    /// The loader asked the loadable to mirror a change; the next attempt that arrives in
    /// `performLoad()` is that mirror.
    var mirrorPending = false
    /// A task is waiting for the loadable's current attempt to end before mirroring.
    var driverRunning = false
  }

  // MARK: - Effects

  struct StartLoad: Sendable {
    let entry: Entry
    let id: UInt64
  }

  struct StartTimer: Sendable {
    let entry: Entry
    let id: UInt64
  }

  /// What to do after leaving the lock.
  struct Effects: Sendable {
    var startLoads: [StartLoad] = []
    var startTimers: [StartTimer] = []
    /// Start the idle sweeper, which first wakes at this offset.
    var startSweeper: Duration?
    var cancelTasks: [Task<Void, Never>] = []
    var resumes: [(Waiter, Result<Value, any Error>)] = []
    /// Loadables to nudge into mirroring their entry (see ``ContentLoader/poke(_:)``).
    var pokes: [Loader.KeyedLoadable] = []
    /// Deliver the outbox: this caller took the delivery role.
    var drain = false
    /// Released after the lock: evicted entries and replaced values (their `deinit` is user
    /// code), and loadables whose only strong reference may have been a weak reference loaded
    /// under the lock (their `deinit` takes the lock).
    var released: [Entry] = []
    var releasedValues: [Value] = []
    /// The sinks of an ended claim: a handler's closure may hold other claims, whose `deinit`
    /// takes the lock.
    var releasedSinks: [ClaimSink] = []
    var retained: [Loader.KeyedLoadable] = []
  }

  // MARK: - State

  let gracePeriod: Duration
  let idleTimeout: Duration?
  let maximumIdleCount: Int

  var index: [Key: Entry] = [:]
  var oldestIdle: Entry?
  var newestIdle: Entry?
  var idleCount = 0
  var sweeperRunning = false
  var sweeperTask: Task<Void, Never>?
  var loadables: [Key: LoadableRecord] = [:]
  var eventSinks: [UInt64: AsyncStream<Event>.Continuation] = [:]
  var outbox: [Delivery] = []
  var delivering = false
  var nextID: UInt64 = 0
  var isShutDown = false

  init(gracePeriod: Duration, idleTimeout: Duration?, maximumIdleCount: Int) {
    self.gracePeriod = gracePeriod
    self.idleTimeout = idleTimeout
    self.maximumIdleCount = maximumIdleCount
  }

  mutating func makeID() -> UInt64 {
    nextID &+= 1
    return nextID
  }

  // MARK: - Claims

  enum BeginOutcome {
    /// There is no entry yet: ask the data source for a prior value outside the lock, then call
    /// again.
    case needsPrior
    case begun(Entry, claimID: UInt64, Effects)
  }

  /// `begin(key)`: adds a claim; the first claim on an entry that is not freshly loaded starts
  /// a load. The claim's sink, if any, gets the snapshot after that start.
  mutating func begin(_ key: Key, sink: Sink?, prior: PriorLookup) -> BeginOutcome {
    let entry: Entry
    if let existing = index[key] {
      entry = existing
    } else if case .fetched(let prior) = prior {
      entry = makeEntry(key, prior: prior)
    } else {
      return .needsPrior
    }
    var effects = Effects()
    let claimID = makeID()
    let isFirst = entry.claims.isEmpty
    entry.claims[claimID] = []
    if isFirst && entry.current == nil && (entry.status != .loaded || entry.isStale) {
      startLoad(entry, byLoadable: false, &effects)
    }
    settle(entry, now: .zero, &effects)  // the entry is claimed: it cannot go idle here
    if let sink {
      let sinkID = makeID()
      entry.claims[claimID] = [ClaimSink(id: sinkID, sink: sink)]
      enqueue(.snapshot(sink, entry.snapshot), &effects)
    }
    return .begun(entry, claimID: claimID, effects)
  }

  /// `Claim.end()`: idempotent. The last claim's end cancels the entry's loads (after the grace
  /// period) and makes the entry idle.
  mutating func end(_ entry: Entry, claimID: UInt64, now: Duration) -> Effects {
    var effects = Effects()
    guard let sinks = entry.claims.removeValue(forKey: claimID) else { return effects }
    for sink in sinks { close(sink.sink, &effects) }
    effects.releasedSinks = sinks
    if entry.isInIndex { settle(entry, now: now, &effects) }
    return effects
  }

  func isActive(_ entry: Entry, claimID: UInt64) -> Bool {
    entry.claims[claimID] != nil
  }

  /// The snapshot a claim shows: its entry's while it is active; afterwards the key's current
  /// entry, if any.
  func snapshot(of entry: Entry, claimID: UInt64) -> Snapshot {
    if entry.claims[claimID] != nil { return entry.snapshot }
    return snapshot(for: entry.key) ?? Snapshot(key: entry.key, status: .notLoaded)
  }

  func snapshot(for key: Key) -> Snapshot? {
    index[key]?.snapshot
  }

  /// Adds an observer to an active claim and queues the current snapshot for it. Returns `nil`
  /// when the claim has ended.
  mutating func addSink(_ sink: Sink, to entry: Entry, claimID: UInt64) -> (UInt64, Effects)? {
    guard entry.claims[claimID] != nil else { return nil }
    var effects = Effects()
    let id = makeID()
    entry.claims[claimID]!.append(ClaimSink(id: id, sink: sink))
    enqueue(.snapshot(sink, entry.snapshot), &effects)
    return (id, effects)
  }

  /// A claim's update stream was terminated by its consumer.
  mutating func removeSink(_ sinkID: UInt64, from entry: Entry, claimID: UInt64) {
    entry.claims[claimID]?.removeAll { $0.id == sinkID }
  }

  // MARK: - Loads

  /// Starts a load of `entry`. A load already running is superseded (an older superseded load is
  /// cancelled, so at most two loads of a key run at once): its result still counts if it turns
  /// out newer.
  mutating func startLoad(_ entry: Entry, byLoadable: Bool, _ effects: inout Effects) {
    let load = Load(id: makeID())
    effects.startLoads.append(StartLoad(entry: entry, id: load.id))
    if let running = entry.current {
      if let old = entry.superseded { cancel(old.task, &effects) }
      entry.superseded = running
      entry.current = load
      return  // still loading: nothing visible changed
    }
    entry.current = load
    entry.statusBeforeLoad = entry.status
    entry.errorBeforeLoad = entry.error
    entry.status = .loading
    notifyClaims(entry, &effects)
    if let value = entry.value, let version = entry.version {
      emit(.loadingWithPriorValue(entry.key, value, version), &effects)
    } else {
      emit(.loading(entry.key), &effects)
    }
    if !byLoadable { mirror(entry.key, &effects) }
  }

  /// Stores the task of a started load. Returns `true` when the load is no longer wanted (it was
  /// cancelled before its task existed): the caller cancels the task.
  mutating func attach(_ task: Task<Void, Never>, toLoad id: UInt64, of entry: Entry) -> Bool {
    if entry.current?.id == id {
      entry.current!.task = task
      return false
    }
    if entry.superseded?.id == id {
      entry.superseded!.task = task
      return false
    }
    return true
  }

  /// A load returned. Results of cancelled loads are dropped; a result whose version is not newer
  /// than the value held does not replace it.
  mutating func finish(_ entry: Entry, load id: UInt64, with result: LoadResult, now: Duration) -> Effects {
    var effects = Effects()
    if entry.current?.id == id {
      entry.current = nil
      finishCurrent(entry, load: id, result, &effects)
    } else if entry.superseded?.id == id {
      entry.superseded = nil
      if case .success(let loaded) = result, accept(loaded, into: entry, &effects) {
        notifyClaims(entry, &effects)
        emit(.loaded(entry.key, entry.value!, entry.version!), &effects)
        if entry.status != .loading { mirror(entry.key, &effects) }
      }
    } else {
      return effects
    }
    settle(entry, now: now, &effects)
    return effects
  }

  private mutating func finishCurrent(_ entry: Entry, load id: UInt64, _ result: LoadResult, _ effects: inout Effects) {
    let outcome: Result<Value, any Error>
    switch result {
    case .success(let loaded):
      _ = accept(loaded, into: entry, &effects)
      entry.status = .loaded
      entry.error = nil
      if id > entry.staleAsOf { entry.isStale = false }
      outcome = .success(entry.value!)
      notifyClaims(entry, &effects)
      emit(.loaded(entry.key, entry.value!, entry.version!), &effects)
    case .failure(let error):
      entry.status = .failed
      entry.error = error
      outcome = .failure(error)
      notifyClaims(entry, &effects)
      emit(.failed(entry.key, error), &effects)
    }
    entry.generation = makeID()
    if entry.waiters.isEmpty {
      mirror(entry.key, &effects)
    } else {
      resumeWaiters(entry, with: outcome, &effects)
    }
  }

  /// Takes `loaded` when it is newer than the value held. Returns whether it did.
  private func accept(_ loaded: (value: Value, version: Version), into entry: Entry, _ effects: inout Effects) -> Bool {
    if let held = entry.version, !(loaded.version > held) { return false }
    if let old = entry.value { effects.releasedValues.append(old) }
    entry.value = loaded.value
    entry.version = loaded.version
    return true
  }

  /// Cancels every load of `entry`. The entry goes back to the status and error it had before its
  /// current load, since nobody asked it to fail.
  mutating func cancelLoads(_ entry: Entry, _ effects: inout Effects) {
    if let superseded = entry.superseded {
      entry.superseded = nil
      cancel(superseded.task, &effects)
    }
    guard let current = entry.current else { return }
    entry.current = nil
    cancel(current.task, &effects)
    entry.status = entry.statusBeforeLoad
    entry.error = entry.errorBeforeLoad
    entry.generation = makeID()
    if let value = entry.value, entry.status == .loaded {
      resumeWaiters(entry, with: .success(value), &effects)
    } else {
      resumeWaiters(entry, with: .failure(CancellationError()), &effects)
    }
    notifyClaims(entry, &effects)
    emit(.cancelled(entry.key), &effects)
  }

  private mutating func resumeWaiters(
    _ entry: Entry, with outcome: Result<Value, any Error>, _ effects: inout Effects
  ) {
    guard !entry.waiters.isEmpty else { return }
    for waiter in entry.waiters { effects.resumes.append((waiter.continuation, outcome)) }
    entry.waiters.removeAll()
    entry.owners = 0
    // Every waiter is an attempt of the key's loadable, which has now seen this outcome.
    loadables[entry.key]?.consumed = entry.generation
  }

  private func cancel(_ task: Task<Void, Never>?, _ effects: inout Effects) {
    if let task { effects.cancelTasks.append(task) }
  }

  // MARK: - Keeping loads and idleness in line with interest

  /// Restores the invariants after a change to `entry`'s claims, owners or loads:
  /// - a load runs only while someone is interested (or during the grace period after that);
  /// - an entry is on the idle list exactly when it has no claims, owners or loads;
  /// - the idle list holds at most `maximumIdleCount` entries, and the sweeper runs while it is
  ///   not empty.
  ///
  /// May evict `entry` itself: callers touch `entry` no more afterwards.
  mutating func settle(_ entry: Entry, now: Duration, _ effects: inout Effects) {
    if entry.isLoading && !entry.isInterested {
      if gracePeriod <= .zero {
        cancelLoads(entry, &effects)
      } else if entry.graceTimer == nil {
        let timer = GraceTimer(id: makeID())
        entry.graceTimer = timer
        effects.startTimers.append(StartTimer(entry: entry, id: timer.id))
      }
    } else if let timer = entry.graceTimer {
      entry.graceTimer = nil
      cancel(timer.task, &effects)
    }
    let isIdle = !entry.isLoading && !entry.isInterested
    if isIdle && !entry.isIdleLinked {
      linkIdle(entry, now: now)
      while idleCount > maximumIdleCount, let oldest = oldestIdle { evict(oldest, &effects) }
      if let timeout = idleTimeout, !sweeperRunning, let oldest = oldestIdle {
        sweeperRunning = true
        effects.startSweeper = oldest.idleSince + timeout
      }
    } else if !isIdle && entry.isIdleLinked {
      unlinkIdle(entry)
    }
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
    if entry.isLoading && !entry.isInterested { cancelLoads(entry, &effects) }
    settle(entry, now: now, &effects)
    return effects
  }

  // MARK: - The idle list and eviction

  private mutating func linkIdle(_ entry: Entry, now: Duration) {
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

  private mutating func unlinkIdle(_ entry: Entry) {
    if let older = entry.older { older.newer = entry.newer } else { oldestIdle = entry.newer }
    if let newer = entry.newer { newer.older = entry.older } else { newestIdle = entry.older }
    entry.older = nil
    entry.newer = nil
    entry.isIdleLinked = false
    idleCount -= 1
  }

  private mutating func evict(_ entry: Entry, _ effects: inout Effects) {
    unlinkIdle(entry)
    index.removeValue(forKey: entry.key)
    detach(entry, &effects)
    emit(.evicted(entry.key), &effects)
  }

  /// Takes `entry` out of use. Its value is released (outside the lock) now rather than when the
  /// last ended claim that still points at the entry goes away.
  private func detach(_ entry: Entry, _ effects: inout Effects) {
    entry.isInIndex = false
    if let value = entry.value { effects.releasedValues.append(value) }
    entry.value = nil
    entry.version = nil
    entry.error = nil
    entry.errorBeforeLoad = nil
    effects.released.append(entry)
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

  // MARK: - Refreshing

  /// `refresh(key)`: the value is out of date. An entry someone is interested in loads again at
  /// once (alongside a load already running, whose result may predate the change); an idle one
  /// is marked stale and loads at its next claim.
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

  private mutating func refresh(_ entry: Entry, _ effects: inout Effects) {
    entry.isStale = true
    entry.staleAsOf = nextID
    if entry.isInterested { startLoad(entry, byLoadable: false, &effects) }
  }

  var count: Int { index.count }

  private mutating func makeEntry(_ key: Key, prior: Prior?) -> Entry {
    let entry = Entry(key: key, prior: prior)
    index[key] = entry
    return entry
  }

  // MARK: - The keyed loadable

  /// The live loadable for `key`, if any. The strong reference is returned out of the lock.
  func liveLoadable(for key: Key) -> Loader.KeyedLoadable? {
    loadables[key]?.loadable
  }

  /// Registers `fresh` as the key's loadable unless a live one exists (which is returned
  /// instead). A loadable registered for an entry that has a status to show is asked to mirror it.
  mutating func register(_ fresh: Loader.KeyedLoadable) -> (Loader.KeyedLoadable, Effects) {
    var effects = Effects()
    if let existing = loadables[fresh.key]?.loadable { return (existing, effects) }
    loadables[fresh.key] = LoadableRecord(loadable: fresh, id: ObjectIdentifier(fresh))
    if let entry = index[fresh.key], entry.status != .notLoaded { mirror(fresh.key, &effects) }
    return (fresh, effects)
  }

  /// The key's loadable was deallocated.
  mutating func unregister(_ key: Key, id: ObjectIdentifier) {
    if loadables[key]?.id == id { loadables.removeValue(forKey: key) }
  }

  /// Asks the key's loadable, if any, to mirror its entry: its next attempt takes the entry's
  /// state rather than loading.
  private mutating func mirror(_ key: Key, _ effects: inout Effects) {
    guard let loadable = loadables[key]?.loadable else { return }
    loadables[key]!.mirrorPending = true
    if loadables[key]!.driverRunning {
      effects.retained.append(loadable)
    } else {
      effects.pokes.append(loadable)
    }
  }

  /// A poke found the loadable loading: a task will wait for that attempt to end. Returns `false`
  /// when such a task is already running.
  mutating func claimDriver(_ key: Key, id: ObjectIdentifier) -> Bool {
    guard loadables[key]?.id == id, !loadables[key]!.driverRunning else { return false }
    loadables[key]!.driverRunning = true
    return true
  }

  /// The driver saw the loadable's attempt end. Returns whether a mirror is still due.
  mutating func releaseDriver(_ key: Key, id: ObjectIdentifier) -> Bool {
    guard loadables[key]?.id == id else { return false }
    loadables[key]!.driverRunning = false
    return loadables[key]!.mirrorPending
  }

  enum Arrival {
    case needsPrior
    case done(Effects)
  }

  /// An attempt of the key's loadable arrived in `performLoad()`. It
  /// - mirrors the entry, when the loader asked for that (see ``mirror(_:_:)``): it joins the
  ///   running load, or takes the entry's state at once, without keeping anything alive;
  /// - otherwise joins the running load, takes a loaded value it has not seen yet, or starts a
  ///   load; either way it keeps the load alive until it ends, like a claim.
  mutating func arrive(
    _ key: Key, loadable: ObjectIdentifier, waiterID: UInt64, continuation: Waiter,
    isCancelled: Bool, prior: PriorLookup, now: Duration
  ) -> Arrival {
    var effects = Effects()
    let entry: Entry
    var isNew = false
    if let existing = index[key] {
      entry = existing
    } else if case .fetched(let prior) = prior {
      entry = makeEntry(key, prior: prior)
      isNew = true
    } else {
      return .needsPrior
    }
    var isMirror = false
    var consumed: UInt64 = 0
    if loadables[key]?.id == loadable {
      // An entry evicted before the mirror request arrived has nothing to mirror: the loadable
      // loads the key like any attempt of its own, so it keeps working after eviction.
      isMirror = loadables[key]!.mirrorPending && !isNew
      consumed = loadables[key]!.consumed
      loadables[key]!.mirrorPending = false
    }
    if isCancelled {
      effects.resumes.append((continuation, .failure(CancellationError())))
    } else if entry.current != nil {
      entry.waiters.append(LoadWaiter(id: waiterID, isOwner: !isMirror, continuation: continuation))
      if !isMirror { entry.owners += 1 }
    } else if isMirror {
      loadables[key]!.consumed = entry.generation
      let outcome: Result<Value, any Error> =
        switch (entry.status, entry.value) {
        case (.loaded, let value?): .success(value)
        case (.failed, _): .failure(entry.error ?? CancellationError())
        default: .failure(CancellationError())
        }
      effects.resumes.append((continuation, outcome))
    } else if entry.generation > consumed, entry.status == .loaded, !entry.isStale, let value = entry.value {
      if loadables[key]?.id == loadable { loadables[key]!.consumed = entry.generation }
      effects.resumes.append((continuation, .success(value)))
    } else {
      startLoad(entry, byLoadable: true, &effects)
      entry.waiters.append(LoadWaiter(id: waiterID, isOwner: true, continuation: continuation))
      entry.owners += 1
    }
    settle(entry, now: now, &effects)
    return .done(effects)
  }

  /// A loadable attempt's task was cancelled (``AsyncLoadable/cancelLoad()``): that attempt alone
  /// throws `CancellationError`; the load goes on only if someone else still wants it.
  mutating func cancelWaiter(_ key: Key, waiterID: UInt64, now: Duration) -> Effects {
    var effects = Effects()
    guard let entry = index[key], let position = entry.waiters.firstIndex(where: { $0.id == waiterID }) else {
      return effects
    }
    let waiter = entry.waiters.remove(at: position)
    if waiter.isOwner { entry.owners -= 1 }
    effects.resumes.append((waiter.continuation, .failure(CancellationError())))
    settle(entry, now: now, &effects)
    return effects
  }

  // MARK: - Delivery

  mutating func addEventSink(_ continuation: AsyncStream<Event>.Continuation) -> UInt64? {
    if isShutDown { return nil }
    let id = makeID()
    eventSinks[id] = continuation
    return id
  }

  mutating func removeEventSink(_ id: UInt64) {
    eventSinks.removeValue(forKey: id)
  }

  private mutating func notifyClaims(_ entry: Entry, _ effects: inout Effects) {
    guard !entry.claims.isEmpty else { return }
    let snapshot = entry.snapshot
    for sinks in entry.claims.values {
      for sink in sinks { enqueue(.snapshot(sink.sink, snapshot), &effects) }
    }
  }

  private mutating func emit(_ event: Event, _ effects: inout Effects) {
    for sink in eventSinks.values { enqueue(.event(sink, event), &effects) }
  }

  private mutating func close(_ sink: Sink, _ effects: inout Effects) {
    switch sink {
    case .stream(let continuation): enqueue(.finish(continuation), &effects)
    case .handler(let handler): handler.isActive.store(false, ordering: .releasing)
    }
  }

  private mutating func enqueue(_ delivery: Delivery, _ effects: inout Effects) {
    outbox.append(delivery)
    if !delivering {
      delivering = true
      effects.drain = true
    }
  }

  /// Takes the queued notifications, or gives up the delivery role when there are none.
  mutating func takeOutbox() -> [Delivery]? {
    if outbox.isEmpty {
      delivering = false
      return nil
    }
    defer { outbox.removeAll(keepingCapacity: true) }
    return outbox
  }

  // MARK: - Shutting down

  /// The loader is being deallocated (so no claim or loadable is left): cancels every task,
  /// finishes the event streams and drops every entry.
  mutating func shutdown() -> Effects {
    var effects = Effects()
    isShutDown = true
    cancel(sweeperTask, &effects)
    sweeperTask = nil
    for entry in index.values {
      cancel(entry.current?.task, &effects)
      cancel(entry.superseded?.task, &effects)
      cancel(entry.graceTimer?.task, &effects)
      entry.current = nil
      entry.superseded = nil
      entry.graceTimer = nil
      resumeWaiters(entry, with: .failure(CancellationError()), &effects)
      entry.older = nil
      entry.newer = nil
      detach(entry, &effects)
    }
    index.removeAll()
    oldestIdle = nil
    newestIdle = nil
    idleCount = 0
    for sink in eventSinks.values { enqueue(.finishEvents(sink), &effects) }
    eventSinks.removeAll()
    return effects
  }
}
