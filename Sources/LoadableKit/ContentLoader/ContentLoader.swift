import Synchronization

/// Loads keyed content — avatars, tiles, thumbnails — once per key, only while somebody needs it.
///
/// Many parts of an app ask for the same keyed resource at once, then lose interest: the cells of
/// a list or a grid. A `ContentLoader` keeps one entry per key. ``begin(_:)`` returns a ``Claim``;
/// the first claim on a key starts its load, later claims share it, and when the last claim ends
/// the load still running is cancelled.
///
/// ```swift
/// let avatars = ContentLoader<User.ID, Image, Date>(
///   existingValue: { id in diskCache.image(for: id) },          // shown at once, maybe stale
///   load: { id in try await api.avatar(for: id) }                // (image, lastModified)
/// )
///
/// // In a cell:
/// claim = avatars.begin(user.id) { snapshot in
///   Task { @MainActor in imageView.image = snapshot.value ?? placeholder }
/// }
/// // When the cell scrolls away or is reused:
/// claim = nil                                                     // or claim.end()
/// ```
///
/// - **Prior values.** The data source's `existingValue` hook supplies a value and its version
///   synchronously when an entry is made; claimants see it at once, with the status
///   ``LoadStatus/loading``, while the fresh load runs, and keep seeing it if the load fails.
/// - **Interim values.** A load can deliver values before its result — a disk copy read
///   asynchronously, a preview — through ``InterimValues``; they are shown like prior values.
/// - **Versions.** Every result carries a `Comparable` version. A result whose version is older
///   than or equal to the value held does not replace it, so a slow, stale response never
///   overwrites a newer one.
/// - **Failures and cancellations are not sticky.** A key whose load failed or was cancelled
///   loads again at its next first claim (or at ``refresh(_:)``).
/// - **Observation.** Each claim delivers its key's ``Snapshot``s (``Claim/updates`` or a handler),
///   and ``events`` delivers every change to every key, delegate-style.
/// - **Composition.** Each key's entry *is* an ``AsyncLoadable`` (``loadable(for:)``): a key loads
///   as an attempt of that loadable, so keyed content composes with `map`, `zip` and the other
///   combinators, and a load the key's claims started is cancelled when they all end, the
///   loadable going back to how it was.
/// - **Bounded memory.** An entry without claims is idle. Idle entries are evicted, least
///   recently used first, beyond ``init(name:gracePeriod:idleTimeout:maximumIdleCount:staleAfter:maximumConcurrentLoads:cost:totalCostLimit:loadOptions:clock:instrument:taskExecutor:existingValue:load:)-(_,_,_,_,_,_,_,_,_,_,_,_,_,(Key)->(Value,Version))``'s
///   `maximumIdleCount` and after its `idleTimeout`, measured on the injected clock.
///
/// The loader is thread-safe without actor isolation. Its state is a value held in a `Mutex`;
/// loads, hooks, handlers and stream continuations always run after the lock is released, and
/// notifications are queued under the lock and delivered in that order. Beginning and ending a
/// claim is O(1) (with `maximumConcurrentLoads`, a claim that starts or cancels a load also
/// walks the limiter's queue, O(waiting)). Streams are bounded by default: a claim's ``Claim/updates`` keeps the latest
/// snapshot only, ``events`` the newest 1,000 events; both take a buffering policy.
///
/// - Precondition: `Key`'s `==` and `hash(into:)` and `Version`'s comparisons do not call into the
///   loader or its keys' loadables: a key is looked up, and versions are compared, under the
///   loader's locks (on every claim), where such a call stops the process ("Recursive call to lock
///   Mutex"). Keys and versions are values — strings, ids, URLs, dates, counters — whose equality
///   and hashing read only themselves.
///
/// See <doc:LoadingKeyedContent> for the detailed design.
public final class ContentLoader<Key: Hashable & Sendable, Value: Sendable, Version: Comparable & Sendable>: Sendable {
  @usableFromInline typealias State = ContentLoaderState<Key, Value, Version>

  @usableFromInline let state: Mutex<State>
  /// The data source, the clock when values go stale by age, and the cost: what each entry
  /// shares with the loader.
  @usableFromInline let keySource: KeySource
  @usableFromInline let existingValue: @Sendable (Key) -> (value: Value, version: Version)?
  @usableFromInline let timeline: Timeline
  let gracePeriod: Duration
  let tracksIdleTime: Bool
  /// How old a value may be before its next first claim refreshes it; `nil` never.
  @usableFromInline let staleAfter: Duration?
  /// Bounds the loads running at once, when `maximumConcurrentLoads` is set.
  let limiter: LoadLimiter?
  /// The loader's name: its keys' loadables are named `name[key]`.
  public let name: String
  /// The instrument told about this loader's claims and its keys' attempts, if any.
  let instrument: (any LoadInstrument)?
  /// The executor the loader's tasks run on, if one was given.
  let taskExecutor: (any TaskExecutor)?
  /// Retry policy and timeout for every key's loads, if given.
  let loadOptions: LoadOptions?
  /// Whether ``loadOptions`` is set. A claim that makes an entry tests this, not the options: an
  /// optional of a type that holds an existential clock is copied and destroyed through its value
  /// witnesses to be tested (~250 instructions a key made, on the claiming thread).
  @usableFromInline let hasLoadOptions: Bool

  /// Creates a loader.
  ///
  /// - Parameters:
  ///   - name: The loader's name, for instruments and dependency trees: a key's loadable is named
  ///     `name[key]`, such as `thumbnails[42]`.
  ///   - gracePeriod: How long a load goes on after the last claim on its key ended, so that a
  ///     key claimed again at once — a reused cell — does not restart its load. The default,
  ///     `.zero`, cancels at once. A negative value counts as `.zero`.
  ///   - idleTimeout: How long an entry may stay idle (without claims or a load) before it is
  ///     evicted; `nil` never evicts by time. A negative value counts as `.zero`.
  ///   - maximumIdleCount: How many idle entries are kept; beyond it the least recently used are
  ///     evicted at once. `0` evicts every entry as soon as it is idle. A negative value counts
  ///     as `0`.
  ///   - staleAfter: How old a loaded value may get before it is *stale*: a stale value is shown
  ///     at once, and refreshed at the key's next first claim (or its loadable's next
  ///     `fetchIfNeeded()`). Its age counts from the end of the load that produced or confirmed
  ///     it, on `clock`. `nil`, the default, never makes a value stale by age. A negative value
  ///     counts as `.zero`.
  ///   - maximumConcurrentLoads: How many keys may load at once; the others wait, most urgent
  ///     claim first (see ``ClaimPriority``), and a waiting load whose claims all ended never
  ///     calls the data source. `nil`, the default, sets no limit; a value below 1 counts as 1.
  ///   - cost: The cost of a value — the bytes of an image — for `totalCostLimit`. It is called
  ///     outside any lock, once per value loaded or supplied as a prior value. `nil`, the default,
  ///     costs nothing.
  ///   - totalCostLimit: The most the values the loader holds may cost together; beyond it, idle
  ///     entries are evicted, those with nothing to show first, then the least recently used.
  ///     Claimed and loading entries are never evicted, so the total may exceed the limit while
  ///     they alone exceed it. `nil`, the default, sets no limit.
  ///   - loadOptions: Retry policy (with backoff and `Retry-After`) and timeout for every key's
  ///     loads: the same type, with the same semantics, as ``AsyncLoadable/loadOptions``. A key's
  ///     load is an attempt of its loadable, and the options apply to it: a failure the policy
  ///     retries is retried within the same load — its claims see ``LoadStatus/loading`` until
  ///     the last try — and a try that outlasts the timeout fails with
  ///     ``LoadableError/timedOut`` (each try has the whole timeout, as for any loadable). With
  ///     `maximumConcurrentLoads`, each try waits for a slot,
  ///     and no slot is held during the backoff. The options' own clock measures the backoff and
  ///     the timeout. `nil`, the default, tries once without a timeout. A key's loadable can be
  ///     given its own options (``loadable(for:)``), which last as long as its entry.
  ///   - clock: The clock that measures `gracePeriod`, `idleTimeout` and `staleAfter`. Tests pass
  ///     a `TestClock` from `LoadableKitTesting`.
  ///   - instrument: An instrument told about this loader's claims and its keys' attempts, before
  ///     the process-wide one (see <doc:ObservingLoadables>); `nil` for none.
  ///   - taskExecutor: The executor the loader's work runs on, as Swift's task executor
  ///     preference: the tasks of its keys' loads — and so the data source's `load` and the
  ///     loadables it loads — its grace-period timers and its idle sweeper. A load a caller of
  ///     ``loadable(for:)`` starts runs its data source call there too. `nil`, the default, runs
  ///     them on the global concurrent executor. An app passes its own executor to keep image
  ///     decoding off a shared pool; a test or a simulation passes a `ManualTaskExecutor` from
  ///     `LoadableKitTesting` to run every step of the loader when it says.
  ///   - existingValue: The data source's synchronous hook for a value that exists already
  ///     (a memory or disk cache), with its version, or `nil`. It is called, outside any lock,
  ///     when an entry is made for a key; the value is shown while the first load runs.
  ///   - load: The data source's load of one key, returning the value and its version. It runs as
  ///     an attempt of the key's loadable, in a task that is cancelled when nobody needs the
  ///     result any more: check for cancellation (or use APIs that do) so cancelled work stops
  ///     early. Its result is dropped once cancelled. Loadables it loads are dependencies of the
  ///     key's attempt.
  @inlinable
  public convenience init(
    name: String = "ContentLoader",
    gracePeriod: Duration = .zero,
    idleTimeout: Duration? = .seconds(300),
    maximumIdleCount: Int = 500,
    staleAfter: Duration? = nil,
    maximumConcurrentLoads: Int? = nil,
    cost: (@Sendable (Value) -> Int)? = nil,
    totalCostLimit: Int? = nil,
    loadOptions: LoadOptions? = nil,
    clock: any Clock<Duration> = ContinuousClock(),
    instrument: (any LoadInstrument)? = nil,
    taskExecutor: (any TaskExecutor)? = nil,
    existingValue: @escaping @Sendable (Key) -> (value: Value, version: Version)? = { _ in nil },
    load: @escaping @Sendable (Key) async throws -> (value: Value, version: Version)
  ) {
    self.init(
      name: name, gracePeriod: gracePeriod, idleTimeout: idleTimeout, maximumIdleCount: maximumIdleCount,
      staleAfter: staleAfter, maximumConcurrentLoads: maximumConcurrentLoads, cost: cost,
      totalCostLimit: totalCostLimit, loadOptions: loadOptions, clock: clock, instrument: instrument,
      taskExecutor: taskExecutor, existingValue: existingValue, load: .plain(load),
      specialized: SpecializedPaths())
  }

  /// Creates a loader whose loads can show values before their results: a disk copy read
  /// asynchronously, a low-resolution preview.
  ///
  /// The parameters are those of
  /// ``init(name:gracePeriod:idleTimeout:maximumIdleCount:staleAfter:maximumConcurrentLoads:cost:totalCostLimit:loadOptions:clock:instrument:taskExecutor:existingValue:load:)-(_,_,_,_,_,_,_,_,_,_,_,_,_,(Key)->(Value,Version))``,
  /// except `load`, which is also given the load's ``InterimValues``:
  ///
  /// ```swift
  /// let thumbnails = ContentLoader<URL, Image, Date>(load: { url, interim in
  ///   if let copy = await diskCache.image(for: url) {            // read off the caller's thread
  ///     interim.deliver(copy.image, version: copy.date)          // shown at once, still loading
  ///   }
  ///   return try await network.image(for: url)                  // (image, lastModified)
  /// })
  /// ```
  ///
  /// Each value delivered is shown to the key's claims and ``events`` as a prior value, with
  /// ``LoadStatus/loading``, under the version rule: one not newer than the value the key shows
  /// is dropped, and so is a result not newer than the interim value shown (the load then ends
  /// with the interim value as its result). See <doc:LoadingKeyedContent>.
  @inlinable
  public convenience init(
    name: String = "ContentLoader",
    gracePeriod: Duration = .zero,
    idleTimeout: Duration? = .seconds(300),
    maximumIdleCount: Int = 500,
    staleAfter: Duration? = nil,
    maximumConcurrentLoads: Int? = nil,
    cost: (@Sendable (Value) -> Int)? = nil,
    totalCostLimit: Int? = nil,
    loadOptions: LoadOptions? = nil,
    clock: any Clock<Duration> = ContinuousClock(),
    instrument: (any LoadInstrument)? = nil,
    taskExecutor: (any TaskExecutor)? = nil,
    existingValue: @escaping @Sendable (Key) -> (value: Value, version: Version)? = { _ in nil },
    load: @escaping @Sendable (Key, InterimValues) async throws -> (value: Value, version: Version)
  ) {
    self.init(
      name: name, gracePeriod: gracePeriod, idleTimeout: idleTimeout, maximumIdleCount: maximumIdleCount,
      staleAfter: staleAfter, maximumConcurrentLoads: maximumConcurrentLoads, cost: cost,
      totalCostLimit: totalCostLimit, loadOptions: loadOptions, clock: clock, instrument: instrument,
      taskExecutor: taskExecutor, existingValue: existingValue, load: .withInterimValues(load),
      specialized: SpecializedPaths())
  }

  /// The initializer of both public ones: `load` keeps the data source's closure as it was given.
  /// They are inlinable, so that `specialized` is made where the loader is created, specialized
  /// for its types (``SpecializedPaths``).
  @usableFromInline
  init(
    name: String, gracePeriod: Duration, idleTimeout: Duration?, maximumIdleCount: Int, staleAfter: Duration?,
    maximumConcurrentLoads: Int?, cost: (@Sendable (Value) -> Int)?, totalCostLimit: Int?, loadOptions: LoadOptions?,
    clock: any Clock<Duration>, instrument: (any LoadInstrument)?, taskExecutor: (any TaskExecutor)?,
    existingValue: @escaping @Sendable (Key) -> (value: Value, version: Version)?, load: DataSourceLoad,
    specialized: SpecializedPaths
  ) {
    let gracePeriod = max(gracePeriod, .zero)
    let idleTimeout = idleTimeout.map { max($0, .zero) }
    let limiter = maximumConcurrentLoads.map { LoadLimiter(limit: $0) }
    state = Mutex(
      State(
        gracePeriod: gracePeriod, idleTimeout: idleTimeout, maximumIdleCount: max(maximumIdleCount, 0),
        totalCostLimit: cost == nil ? nil : totalCostLimit.map { max($0, 0) }, limiter: limiter))
    self.limiter = limiter
    self.gracePeriod = gracePeriod
    tracksIdleTime = idleTimeout != nil
    self.staleAfter = staleAfter.map { max($0, .zero) }
    timeline = Timeline(clock)
    self.existingValue = existingValue
    self.keySource = KeySource(
      load: load, clock: staleAfter == nil ? nil : timeline, cost: cost, specialized: specialized)
    self.name = name
    self.instrument = instrument
    self.taskExecutor = taskExecutor
    self.loadOptions = loadOptions
    hasLoadOptions = loadOptions != nil
    if instrument != nil { LoadInstrumentation.noteObjectInstrument() }
  }

  /// How many ``Claim`` objects exist, ended or not. While there is one, the loader holds one
  /// reference to itself for all of them (``claimMade()``, ``claimFreed()``, with the claim): a
  /// claim keeps its loader alive without a retain and a release of its own.
  @usableFromInline let claimObjects = Atomic<Int>(0)

  deinit {
    // No claim is left (they hold the loader). Loadables handed out keep working on their own.
    perform(withState { $0.shutdown() })
  }

  // MARK: - Claims

  /// Claims `key`: the first claim on a key starts its load.
  ///
  /// While a key has claims its entry is kept and a running load goes on. When the last claim
  /// ends, a load that only the claims wanted is cancelled (after the grace period), and the key
  /// goes back to how it was before that load; a load somebody else asked for — a caller of the
  /// key's ``loadable(for:)`` — goes on. A key that is loaded and not stale is not loaded again by
  /// a new claim; a key that never loaded, failed, was cancelled or was refreshed is.
  ///
  /// - Complexity: O(1); O(waiting) with a limit when it starts a load. For a key without an
  ///   entry, the data source's `existingValue` hook is called once, outside the lock.
  ///
  /// Inlinable: a claim on a key that other claims already hold — a list's cell claiming a
  /// thumbnail another cell shows — is a counter incremented under the loader's lock, and this
  /// way it runs specialized for the caller's `Key`, `Value` and `Version` instead of looking up
  /// the generic metadata of the loader's state at run time.
  @inlinable
  public func begin(_ key: Key) -> Claim {
    begin(key, priority: .visible)
  }

  /// Claims `key` with a priority, like ``begin(_:)``: the key's load runs at the highest
  /// priority among its claims. Change it later with ``Claim/priority``.
  @inlinable
  public func begin(_ key: Key, priority: ClaimPriority) -> Claim {
    let claim = Claim(loader: self, key: key, id: nextUniqueID(), priority: priority)
    switch state.withLock(owner: self, { $0.beginFast(claim) }) {
    case .begun: return claim
    case .general: return begin(claim, sink: nil)
    case .noEntry: return begin(claim, sink: nil, fresh: makeEntry(key))
    }
  }

  /// Claims `key` with a priority and a handler, like ``begin(_:onUpdate:)``.
  public func begin(
    _ key: Key, priority: ClaimPriority, onUpdate: @escaping @Sendable (Snapshot) -> Void
  ) -> Claim {
    begin(key, priority: priority, sink: .handler(Handler(onUpdate)))
  }

  /// Claims `key`, like ``begin(_:)``, and calls `onUpdate` with the key's current snapshot,
  /// then with every change until the claim ends.
  ///
  /// Calls are made one at a time, in order, never under the loader's lock. The first call
  /// usually happens before this method returns (so a cell shows a prior value without a blank
  /// frame); it happens later when another thread is delivering notifications at that moment.
  /// The first call, with the snapshot at `begin`, is always made, even when the claim ends
  /// before it could be delivered; after ``Claim/end()`` no other call starts, though one already
  /// under way on another thread may finish. The handler may call back into the loader; it should not capture its own
  /// claim strongly unless it ends the claim explicitly.
  public func begin(_ key: Key, onUpdate: @escaping @Sendable (Snapshot) -> Void) -> Claim {
    begin(key, priority: .visible, sink: .handler(Handler(onUpdate)))
  }

  func begin(_ key: Key, priority: ClaimPriority, sink: Sink?) -> Claim {
    begin(Claim(loader: self, key: key, id: nextUniqueID(), priority: priority), sink: sink)
  }

  /// Registers `claim` (made by the caller), with its observer if any: the general path.
  /// `fresh`: an entry made for the key beforehand, when the loader held nothing for it.
  ///
  /// Inlinable, as ``end(_:)`` is: the first claim on a key comes here from ``begin(_:priority:)``,
  /// and specialized for the caller's types the lock, the effects and the result's tuple need no
  /// generic metadata looked up at run time (unspecialized: four look-ups, ~330 instructions
  /// each, of a key churned).
  @inlinable
  func begin(_ claim: Claim, sink: Sink?, fresh: KeyedLoadable? = nil) -> Claim {
    let key = claim.key
    let expiredBefore = expiryThreshold()
    // Tested once, here: a `Sink?` (it can hold an `AsyncStream`'s continuation, a type of another
    // module whose layout is not known here) is copied and destroyed through its value witnesses
    // each time `if let` tests it, ~190 instructions a claim that has no observer.
    let observed = sink != nil
    var fresh = fresh
    while true {
      let (begun, effects) = withState { state -> (Bool, State.Effects) in
        var effects = State.Effects()
        guard let entry = state.entry(for: key, fresh: fresh, &effects) else { return (false, effects) }
        state.begin(claim, on: entry, expiredBefore: expiredBefore, &effects)
        if observed, let sink { state.observe(claim, on: entry, with: sink, &effects) }
        return (true, effects)
      }
      perform(consume effects)
      if begun { return claim }
      fresh = makeEntry(key)
    }
  }

  /// A claim's priority changed.
  func setPriority(_ claim: Claim, to priority: ClaimPriority) {
    let effects = withState { state -> State.Effects in
      var effects = State.Effects()
      state.setPriority(claim, to: priority, &effects)
      return effects
    }
    perform(consume effects)
  }

  /// Raises the key's running task when its priority went up (a running task is never lowered;
  /// its place in the queue was moved under the lock), and tells the keys its attempt waits for.
  func reprioritize(_ entry: KeyedLoadable, to priority: ClaimPriority, raised: Bool) {
    if raised {
      entry.escalateRunningAttempt(to: priority.taskPriority)
    }
    entry.passDemandUpstream()
  }

  /// ``Claim/end()``: on a key that other claims still hold, and that needs nothing else done
  /// (no observer of this claim to close, no priority to lower), a counter decremented under the
  /// lock, specialized for the caller's types; otherwise ``end(_:)``.
  @inlinable
  final func endClaim(_ claim: Claim) {
    if !state.withLock(owner: self, { $0.endOnClaimedEntry(claim) }) { end(claim) }
  }

  /// The general path of a claim's end (the last claim on its key, or one whose end changes more
  /// than the counts); inlinable for the reason ``begin(_:sink:fresh:)`` is.
  @inlinable
  func end(_ claim: Claim) {
    let now = currentTime()
    let (entry, effects) = withState { state -> (KeyedLoadable?, State.Effects) in
      var effects = State.Effects()
      let entry = state.end(claim, now: now, &effects)
      return (entry, effects)
    }
    ContentLoaderSeams.claimEnded()
    perform(consume effects)
    _ = entry  // released here, outside the lock
  }

  /// A new entry for `key`, made outside the lock: the `existingValue` hook is user code.
  ///
  /// Inlinable, with the entry's initializer: a claim on a key the loader holds nothing for makes
  /// its entry here, specialized for the caller's types, instead of in the library's
  /// unspecialized code, which looked up the metadata of the entry's generic types at run time
  /// (the versions, their tuples and optionals: about a dozen, ~330 instructions each).
  @inlinable
  func makeEntry(_ key: Key) -> KeyedLoadable {
    let entry = KeyedLoadable(loader: self, key: key, prior: existingValue(key), source: keySource)
    if hasLoadOptions { applyLoadOptions(to: entry) }
    return entry
  }

  /// Gives a new entry the loader's ``loadOptions``.
  @usableFromInline
  func applyLoadOptions(to entry: KeyedLoadable) {
    if let loadOptions { entry.loadOptions = loadOptions }
  }

  // MARK: - Reading and refreshing

  /// How many of the loader's loads wait for a slot of `maximumConcurrentLoads`, and how many
  /// run, in one read: a list's "12 queued, 6 loading".
  ///
  /// With a limit, `running` counts the slots taken — loads calling the data source, and slots
  /// kept for a load whose task has not come for it yet — and `waiting` the loads queued for one
  /// (``Snapshot/isWaitingForSlot``). Without a limit nothing waits, and `running` counts the keys
  /// that are loading.
  ///
  /// - Complexity: O(1) with a limit; O(n) in the number of entries without one.
  public var loadCounts: (waiting: Int, running: Int) {
    if let limiter { return limiter.counts }
    return withState { state in
      (0, state.index.values.reduce(0) { $0 + ($1.statusMirror.load(ordering: .acquiring) == LoadStatus.loading.code ? 1 : 0) })
    }
  }

  /// The key's current snapshot, or `nil` when the loader holds no entry for it.
  @inlinable
  public func snapshot(for key: Key) -> Snapshot? {
    // The loadable's snapshot holds copies of user values: released here, after the lock.
    withState { $0.snapshot(for: key) }?.0
  }

  /// The number of entries the loader holds: claimed, loading and idle.
  ///
  /// Claimed and loading entries are never evicted; idle ones are bounded by `maximumIdleCount`.
  public var count: Int {
    withState { $0.count }
  }

  /// Marks `key`'s value out of date.
  ///
  /// A claimed key loads again at once, and the current value stays on screen meanwhile. When a
  /// load is running — it may return data from before the change — it is superseded: a fresh load
  /// starts at once, the running one is cancelled, its claims and the callers waiting on the key's
  /// loadable wait for the fresh one, and its result, if it still comes, is dropped whatever its
  /// version. An idle entry is marked stale: it loads again at its next first claim, or when its
  /// loadable's `fetchIfNeeded()` is called. Does nothing for a key without an entry. See
  /// <doc:LoadingKeyedContent>.
  public func refresh(_ key: Key) {
    perform(withState { $0.refresh(key) })
  }

  /// ``refresh(_:)`` for every key the loader holds.
  ///
  /// - Complexity: O(n) in the number of entries.
  public func refreshAll() {
    perform(withState { $0.refreshAll() })
  }

  /// ``refresh(_:)`` for every key the loader holds that `predicate` chooses: "every key of this
  /// portal item", "every key older than this version".
  ///
  /// `predicate` is called outside the lock, once per key held when the call starts.
  ///
  /// - Complexity: O(n) in the number of entries.
  public func refresh(where predicate: (Key) throws -> Bool) rethrows {
    let chosen = try keys().filter(predicate)
    perform(withState { $0.refresh(chosen, loading: true) })
  }

  /// Marks the keys that `predicate` chooses stale without loading them now: each loads at its
  /// next first claim (or its loadable's next `fetchIfNeeded()`), and shows its current value
  /// meanwhile. A claimed key goes on showing its value until then.
  ///
  /// `predicate` is called outside the lock, once per key held when the call starts.
  ///
  /// - Complexity: O(n) in the number of entries.
  public func invalidate(where predicate: (Key) throws -> Bool) rethrows {
    let chosen = try keys().filter(predicate)
    perform(withState { $0.refresh(chosen, loading: false) })
  }

  /// ``refresh(_:)`` for every key whose snapshot `predicate` chooses: "every thumbnail older than
  /// version 7", "every failed key".
  ///
  /// Decided atomically with the loader's state, without running `predicate` under the lock: the
  /// snapshots of every key are taken in one step of the loader's lock (a consistent view across
  /// keys), `predicate` is called on them outside it, and then, in one more step, each key chosen
  /// is refreshed only if its state is still the one its snapshot showed — the same entry, status,
  /// value and running load. A key that changed in between (a load ended, a write landed, it was
  /// removed) is skipped: `predicate` never saw its current state. Call again to decide on it.
  ///
  /// - Parameter predicate: Whether to refresh a key, given its snapshot. Called outside the
  ///   lock, once per key held when the call starts; it may call the loader.
  /// - Returns: The keys refreshed.
  /// - Complexity: O(n) in the number of entries.
  @discardableResult
  public func refresh(matching predicate: (Snapshot) throws -> Bool) rethrows -> [Key] {
    try act(matching: predicate, loading: true)
  }

  /// ``invalidate(where:)`` for every key whose snapshot `predicate` chooses: each is marked
  /// stale, and loads at its next first claim (or its loadable's next `fetchIfNeeded()`).
  ///
  /// Decided as ``refresh(matching:)`` decides: on snapshots taken in one step, with `predicate`
  /// outside the lock, acting only on keys whose state has not changed since.
  ///
  /// - Returns: The keys invalidated.
  /// - Complexity: O(n) in the number of entries.
  @discardableResult
  public func invalidate(matching predicate: (Snapshot) throws -> Bool) rethrows -> [Key] {
    try act(matching: predicate, loading: false)
  }

  private func act(matching predicate: (Snapshot) throws -> Bool, loading: Bool) rethrows -> [Key] {
    let taken = withState { $0.takeSnapshots() }
    var chosen: [(entry: KeyedLoadable, stamp: State.Stamp)] = []
    for item in taken where try predicate(item.snapshot) { chosen.append((item.entry, item.stamp)) }
    let (acted, effects) = withState { [chosen] in $0.refresh(chosen: chosen, loading: loading) }
    perform(consume effects)
    // The snapshots, the attempts the stamps hold and the entries are released here, after the lock.
    withExtendedLifetime((taken, chosen)) {}
    return acted
  }

  /// The keys held, copied out of the lock.
  func keys() -> [Key] {
    withState { Array($0.index.keys) }
  }

  // MARK: - Observing

  /// Every change to every key, delegate-style, with a buffer of the newest 1,000 events: see
  /// ``events(bufferingPolicy:)``.
  public var events: AsyncStream<Event> {
    events(bufferingPolicy: .bufferingNewest(1_000))
  }

  /// Every change to every key, delegate-style: each call makes a new stream that receives the
  /// changes from then on, in order, one event per change.
  ///
  /// A consumer slower than the changes loses events as `bufferingPolicy` says (the oldest, by
  /// default); pass `.unbounded` only when the consumer keeps up. The stream finishes when the
  /// loader is deallocated; ending the iteration unregisters it.
  ///
  /// - Parameter bufferingPolicy: What the stream keeps while its consumer is busy.
  public func events(bufferingPolicy: AsyncStream<Event>.Continuation.BufferingPolicy) -> AsyncStream<Event> {
    let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: bufferingPolicy)
    if let id = withState({ $0.addEventSink(continuation) }) {
      continuation.onTermination = { [weak self] _ in
        let removed = self?.withState { $0.removeEventSink(id) }
        _ = removed  // released outside the lock
      }
    } else {
      continuation.finish()
    }
    return stream
  }

  // MARK: - Effects

  /// Runs `body` on the state under the lock (made visible to ThreadSanitizer).
  @inlinable
  func withState<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
    state.withLock(owner: self, body)
  }

  /// With `staleAfter`: values loaded before this offset are stale. Read before taking the lock.
  @usableFromInline
  func expiryThreshold() -> Duration? {
    staleAfter.map { timeline.now() - $0 }
  }

  /// The time for the idle list, read before taking the lock; only needed with an idle timeout.
  @usableFromInline
  func currentTime() -> Duration {
    tracksIdleTime ? timeline.now() : .zero
  }

  /// An entry's loadable changed status (``KeyedLoadable/statusDidChange()``), possibly on several
  /// threads at once: each call reads the entry's current state under the lock.
  func changed(_ entry: KeyedLoadable) {
    keySource.specialized.changed(self, entry)
  }

  /// ``changed(_:)``, reached through ``SpecializedPaths/changed``: specialized where the loader
  /// was created, the lock's closure names the loader's state without looking up its metadata at
  /// run time, on every status change of every key.
  @inlinable
  final func changedSpecialized(_ entry: KeyedLoadable) {
    let now = currentTime()
    perform(withState { $0.changed(entry, now: now) })
  }
}
