import Synchronization

extension ContentLoader {
  /// The key's entry, which is an ``AsyncLoadable``, so keyed content composes with `map`, `zip`
  /// and the other combinators.
  ///
  /// ```swift
  /// let header = zip(avatars.loadable(for: user.id), profiles.loadable(for: user.id))
  /// let (avatar, profile) = try await header.fetchIfNeeded()
  /// ```
  ///
  /// The key loads as attempts of this loadable, whoever asks: a claim, ``refresh(_:)``, or a
  /// caller of the loadable. Its `content` is a value a load produced (or kept by the version
  /// check); a prior value from the `existingValue` hook is visible through claims,
  /// ``snapshot(for:)`` and ``events`` only.
  ///
  /// Claims are *interest* in the loadable's attempt, not callers of it. An attempt the claims
  /// started is wanted by nobody else: when the last claim ends, it is cancelled and the loadable
  /// goes back to the status, content and error it had before, so a loadable that nobody loaded
  /// is never failed by a claim that came and went. A caller's own `load()` or `fetch()` is a
  /// normal attempt (or joins the running one and keeps it alive while it waits), unaffected by
  /// claims ending; ``AsyncLoadable/cancelLoad()`` cancels it as on any loadable.
  ///
  /// Holding the loadable is not a claim and keeps no entry: the entry may be evicted. The
  /// loadable keeps working — loading it makes it the key's entry again — and this method returns
  /// the same instance for as long as something holds it.
  ///
  /// - Complexity: O(1). For a key without an entry or loadable, the data source's
  ///   `existingValue` hook is called once, outside the lock.
  public func loadable(for key: Key) -> AsyncLoadable<Value> {
    var fresh: KeyedLoadable?
    while true {
      let (loadable, effects) = withState { [fresh] state -> (KeyedLoadable?, State.Effects) in
        var effects = State.Effects()
        return (state.handOut(key, fresh: fresh, &effects), effects)
      }
      perform(consume effects)
      if let loadable { return loadable }
      fresh = makeEntry(key)
    }
  }

  /// What the loader last told the claims and the event streams about an entry (not nested
  /// here, where it would be generic over the loader's parameters it does not use: each use in
  /// the library's unspecialized code would look up its metadata).
  typealias Shown = ShownKeyState

  struct GraceTimer: Sendable {
    let id: UInt64
    var task: Task<Void, Never>?
  }

  /// An interim value a key's load delivered before its result (``InterimValues``), with its
  /// version and cost.
  @usableFromInline
  struct HeldInterim: Sendable {
    @usableFromInline var value: Value
    @usableFromInline var version: Version
    @usableFromInline var cost: Int
    /// Set when the load that delivered it returned: the counter its result's content will have.
    /// Once the content reaches it, the result (the interim value itself, when it was the newer)
    /// shows in its place.
    @usableFromInline var retiredAt: UInt64?
  }

  /// A ``HeldInterim`` in a box of its own (``Versions/interim``).
  @usableFromInline
  final class InterimBox: Sendable {
    @usableFromInline let held: HeldInterim
    @inlinable init(_ held: HeldInterim) { self.held = held }
  }

  /// The prior value and the version of each content of a key, under the entry's own small lock.
  @usableFromInline
  struct Versions {
    @usableFromInline var prior: (value: Value, version: Version)?
    @usableFromInline var priorCost: Int
    /// The newest interim value a load delivered, shown in place of the content and the prior
    /// value, which are older, until a newer value replaces it.
    @inlinable var interim: HeldInterim? {
      get { interimBox?.held }
      set { interimBox = newValue.map(InterimBox.init) }
    }
    /// ``interim``, boxed: most keys never hold one, and inline it took some 40 bytes a key. A
    /// change makes a new box (the old one may be released under the lock: the value it holds
    /// is still held by the copy the caller releases after it, or by the new box).
    @usableFromInline var interimBox: InterimBox?
    /// Counts the interim values taken and dropped: the loader tells its claims of each.
    @usableFromInline var interimMark: UInt64
    /// The attempt that last returned its result: its interim values come too late.
    @usableFromInline var returned: UInt64?
    /// The version of the content that the loadable's `contentVersion` counter names: the
    /// current content, and the one the attempt running may produce. (One after a key's first
    /// load: the first is inline.)
    @usableFromInline var slots: InlineFirstArray<(counter: UInt64, version: Version, loadedAt: Duration, cost: Int)>

    /// A new key's versions: its prior value, if any, and nothing loaded yet (inlinable, with the
    /// entry's initializer: see ``ContentLoader/makeEntry(_:)``).
    @inlinable
    init(prior: (value: Value, version: Version)?, priorCost: Int) {
      self.prior = prior
      self.priorCost = priorCost
      interimBox = nil
      interimMark = 0
      returned = nil
      slots = InlineFirstArray()
    }

    /// The interim value shown when the content's counter is `counter`, if any.
    @inlinable func shownInterim(at counter: UInt64) -> HeldInterim? {
      guard let interim else { return nil }
      if let retiredAt = interim.retiredAt, counter >= retiredAt { return nil }
      return interim
    }

    /// Applies the version rule to an interim value of `attempt`: one not newer than the value
    /// shown — an interim value, the content, or else the prior value — is refused (`false`), and
    /// so is one that comes after its load returned. Returns the interim value let go of, to be
    /// released by the caller outside the locks.
    mutating func offer(
      _ offered: (value: Value, version: Version), cost offeredCost: Int, attempt: UInt64?, counter: UInt64,
      content: Value?
    ) -> (taken: Bool, dropped: HeldInterim?) {
      if let attempt, returned == attempt { return (false, nil) }
      if let shown = shownInterim(at: counter) {
        guard offered.version > shown.version else { return (false, nil) }
      } else if (counter > 0 ? content : prior?.value) != nil, let heldVersion = version(at: counter) {
        guard offered.version > heldVersion else { return (false, nil) }
      }
      let dropped = interim
      interim = HeldInterim(value: offered.value, version: offered.version, cost: offeredCost)
      interimMark &+= 1
      return (true, dropped)
    }

    /// An interim value whose load's result shows now (the content reached its counter), taken
    /// out to be released by the caller outside the locks.
    mutating func takeRetiredInterim(at counter: UInt64) -> HeldInterim? {
      guard let interim, let retiredAt = interim.retiredAt, counter >= retiredAt else { return nil }
      self.interim = nil
      return interim
    }

    @inlinable func version(at counter: UInt64) -> Version? {
      for slot in slots where slot.counter == counter { return slot.version }
      return counter == 0 ? prior?.version : nil
    }

    /// When the content the counter names was loaded (or confirmed by a load), on the loader's
    /// timeline; `nil` for the prior value.
    /// The cost of the value the counter names (the prior value's for `0`).
    @inlinable func cost(at counter: UInt64) -> Int {
      for slot in slots where slot.counter == counter { return slot.cost }
      return counter == 0 && prior != nil ? priorCost : 0
    }

    /// What the values shown at `counter` cost: the content's (or prior value's) and an interim
    /// value's, which is held beside it.
    func shownCost(at counter: UInt64) -> Int {
      cost(at: counter) + (shownInterim(at: counter)?.cost ?? 0)
    }

    func loadedAt(_ counter: UInt64) -> Duration? {
      for slot in slots where slot.counter == counter { return slot.loadedAt }
      return nil
    }

    /// Applies the version rule to a load's result: a result not newer than the value held —
    /// the content, or else the prior value — does not replace it. Records the version of what
    /// the attempt returns under the counter it will have; returns that value and the versions
    /// let go of (released by the caller, outside the lock).
    ///
    /// An interim value shown is the value held: a result not newer than it is dropped, and the
    /// interim value is the load's result. Either way the interim value stays shown until the
    /// result does (`retiredAt`), and `attempt`'s later interim values are refused.
    ///
    /// Inlinable, with ``KeyedLoadable/loadAndKeep(attempt:)``: its types depend on the loader's.
    @inlinable
    mutating func keep(
      _ loaded: (value: Value, version: Version), cost loadedCost: Int, counter: UInt64, content: Value?,
      now: Duration, attempt: UInt64?
    ) -> (Value, [Version]) {
      let held = counter > 0 ? content : prior?.value
      var kept = loaded
      var keptCost = loadedCost
      if let shown = shownInterim(at: counter) {
        if !(loaded.version > shown.version) {
          kept = (shown.value, shown.version)
          keptCost = shown.cost
        }
        interim!.retiredAt = counter &+ 1
      } else if let held, let heldVersion = version(at: counter), !(loaded.version > heldVersion) {
        kept = (held, heldVersion)
        keptCost = cost(at: counter)
      }
      if let attempt { returned = attempt }
      var dropped: [Version] = []
      slots.removeAll { slot in
        guard slot.counter < counter || slot.counter == counter &+ 1 else { return false }
        dropped.append(slot.version)
        return true
      }
      slots.append((counter &+ 1, kept.version, now, keptCost))
      return (kept.value, dropped)
    }

    /// Applies the version rule to a local write: a value not newer than the value held — the
    /// content, or else the prior value — is refused (`nil`). Otherwise records its version under
    /// the counter the content will have, and returns the versions let go of (released by the
    /// caller, outside the lock).
    ///
    /// An interim value shown is the value held; a value written replaces it (returned in
    /// `dropped`, to be released by the caller outside the locks).
    mutating func write(
      _ written: (value: Value, version: Version), cost writtenCost: Int, counter: UInt64, content: Value?,
      now: Duration, dropped droppedInterim: inout HeldInterim?
    ) -> [Version]? {
      let held = counter > 0 ? content : prior?.value
      if let shown = shownInterim(at: counter) {
        if !(written.version > shown.version) { return nil }
      } else if held != nil, let heldVersion = version(at: counter), !(written.version > heldVersion) {
        return nil
      }
      if interim != nil {
        droppedInterim = interim
        interim = nil
        interimMark &+= 1
      }
      var dropped: [Version] = []
      slots.removeAll { slot in
        guard slot.counter < counter || slot.counter == counter &+ 1 else { return false }
        dropped.append(slot.version)
        return true
      }
      slots.append((counter &+ 1, written.version, now, writtenCost))
      return dropped
    }
  }

  /// What a key's entry needs of its loader to load on its own (it keeps working after the loader
  /// is gone, for as long as something holds its loadable): the data source, the clock when values
  /// go stale by age, and the cost of a value. One object, shared by the loader and all its
  /// entries: copied into each entry, the closures took some 70 bytes a key and a retain each.
  @usableFromInline
  final class KeySource: Sendable {
    @usableFromInline let load: DataSourceLoad
    /// The loader's timeline, when values go stale by age.
    @usableFromInline let clock: Timeline?
    @usableFromInline let cost: (@Sendable (Value) -> Int)?
    @usableFromInline let specialized: SpecializedPaths

    init(load: DataSourceLoad, clock: Timeline?, cost: (@Sendable (Value) -> Int)?, specialized: SpecializedPaths) {
      self.load = load
      self.clock = clock
      self.cost = cost
      self.specialized = specialized
    }
  }

  /// The paths a key's load takes through its loader, made where the loader is created (its
  /// initializers are inlinable), so specialized for the loader's types there. Reached from the
  /// key's loadable, whose code is the library's, unspecialized: there, naming the loader's state,
  /// a key's versions or the result's tuple looks up their generic metadata at run time (~335
  /// instructions each). Closures that capture nothing. A loader created in the library's own
  /// unspecialized code gets them unspecialized: no worse than calling the same functions.
  @usableFromInline
  struct SpecializedPaths: Sendable {
    /// ``KeyedLoadable/loadAndKeep(attempt:)``: the data source's call and the version rule (a
    /// key claimed, loaded and let go: 68,115 instructions unspecialized, 51,041 with this, when
    /// it was made), its value in the ``ContentBox`` the engine stores: boxed in the library's
    /// unspecialized code, each load looked up `ContentBox<Value>`'s metadata at run time (~325
    /// instructions).
    @usableFromInline let loadAndKeep: @Sendable (KeyedLoadable, UInt64?) async throws -> AnyContentBox
    /// What a key's attempt runs (``AsyncLoadable/directLoad``): ``KeyedLoadable/loadKey(for:)``.
    /// One closure a loader, made where its types are known, so that a key holds no closure of
    /// its own.
    @usableFromInline let loadKey: @Sendable (AnyObject, UInt64) async throws -> AnyContentBox
    /// ``ContentLoader/changed(_:)``: a key's status changed (its loadable's status hook).
    @usableFromInline let changed: @Sendable (ContentLoader, KeyedLoadable) -> Void
    /// ``KeyedLoadable/loadPriority``, read under the loader's lock: the priority of the task of
    /// an attempt started for claims (``ContentLoader/launchPriority(of:)``) and of the key's
    /// place in the load limit's queue.
    @usableFromInline let loadPriority: @Sendable (ContentLoader, KeyedLoadable) -> ClaimPriority
    /// Removes a key from the loader's index (``ContentLoaderState/evict(_:_:)``): the
    /// dictionary's and its optional element's metadata are not looked up at run time.
    @usableFromInline let removeFromIndex: @Sendable (inout [Key: KeyedLoadable], Key) -> Void

    @inlinable
    init() {
      loadAndKeep = { entry, attempt in ContentBox(try await entry.loadAndKeep(attempt: attempt)) }
      loadKey = { entry, attempt in try await unsafeDowncast(entry, to: KeyedLoadable.self).loadKey(for: attempt) }
      changed = { loader, entry in loader.changedSpecialized(entry) }
      loadPriority = { loader, entry in loader.withState { _ in entry.loadPriority } }
      removeFromIndex = { index, key in index.removeValue(forKey: key) }
    }
  }

  /// One key's entry: the key's loadable, whose attempts call the data source.
  ///
  /// Its status, content, error and attempts are the loadable's own. The fields below are the
  /// loader's bookkeeping, touched only under the loader's lock.
  @usableFromInline
  final class KeyedLoadable: AsyncLoadable<Value>, @unchecked Sendable {
    @usableFromInline let key: Key
    /// The loader's data source, clock and cost, shared with the loader and its other keys.
    @usableFromInline let source: KeySource
    /// Set once, a `let`: a weak `var` is read with a dynamic exclusivity check (~76
    /// instructions; three a key: its creation, its load and its status hook).
    @usableFromInline weak let loader: ContentLoader?
    /// The versions' lock and, beside it, the versions it guards (``withVersions(_:)``). Not a
    /// `Mutex<Versions>`: the key's `deinit` is the library's unspecialized code, which destroys
    /// its fields through their types' metadata, looked up at run time — `Mutex`, its cell and the
    /// versions each, some 1,000 instructions a key; a `Mutex<Void>` needs none, the versions one.
    @usableFromInline let versionsLock = Mutex<Void>(())
    @exclusivity(unchecked) @usableFromInline var versionsValue: Versions

    // Under the loader's lock, so without the dynamic exclusivity checks (each access to a class's
    // stored `var` costs a check otherwise, about 90 instructions; a claim's begin and end made
    // six):
    @exclusivity(unchecked) @usableFromInline var claimCount = 0
    /// How many claims there are at each ``ClaimPriority``.
    @exclusivity(unchecked) @usableFromInline var claimsAt = PriorityCounts()
    /// Who else waits for the running load, by demand, under a load limit (`ContentLoader+Demand`).
    @exclusivity(unchecked) var waiting: WaitingDemand?
    /// How many times ``loadPriority`` changed: orders the demand this key passes upstream.
    @exclusivity(unchecked) var demandVersion: UInt64 = 0
    /// What the value shown costs, as counted in the loader's total.
    @exclusivity(unchecked) var cost = 0
    /// The observers of the claims that have some, by claim.
    @exclusivity(unchecked) @usableFromInline var sinks: [UInt64: [ClaimSink]] = [:]
    /// The attempt in which the claims hold interest.
    @exclusivity(unchecked) var held: LoadStateMachine.Attempt?
    @exclusivity(unchecked) var graceTimer: GraceTimer?
    /// Loader-wide marks of the last refresh and of when the running attempt was first seen: only
    /// an attempt seen after the refresh makes the key fresh again.
    @exclusivity(unchecked) var refreshMark: UInt64 = 0
    @exclusivity(unchecked) var attemptMark: UInt64 = 0
    /// The key's ticket with the loader's limit (``LoadLimiter``): its own, or the one of an
    /// evicted entry of the key whose abandoned work still holds the key's slot, taken under the
    /// loader's lock before this entry was claimed or handed out
    /// (``ContentLoaderState/takeEvictedSlot(for:_:)``), and fixed from then on.
    @exclusivity(unchecked) var slotTicket = nextUniqueID()
    // The idle list (least recently used first), with `isIdleLinked` and `isIdleEmpty` below.
    @exclusivity(unchecked) var idleSince: Duration = .zero
    @exclusivity(unchecked) var newer: KeyedLoadable?
    @exclusivity(unchecked) var older: KeyedLoadable?
    // The one-byte fields last, after `shown`, which leaves seven bytes of its last word free: in
    // declaration order between eight-byte fields they took 16 bytes of padding. (Not in the
    // four bytes after `versionsLock`: ThreadSanitizer sees its lock's access to the `Void` it
    // guards, at the end of the lock, as an access to what stands there.)
    @exclusivity(unchecked) var shown = Shown.nothing
    /// `!sinks.isEmpty`, kept with it (under the loader's lock): asking the dictionary,
    /// unspecialized, looks up the metadata of its element type, on every change of the key.
    @exclusivity(unchecked) var hasSinks = false
    /// Whether ``Versions/interimMark`` may have moved from zero (set under the versions' lock,
    /// before it moves, by an offer of an interim value and by a removal; never reset). Until
    /// then the loader's sync reads no mark and no retired interim value without taking that
    /// lock: a loader whose loads deliver no interim values never does. The versions are
    /// generic, so reading them in the library's unspecialized code looks up their metadata and
    /// their tuples' (about a tenth of a key's load).
    let hasInterimMark = Atomic<Bool>(false)
    /// The key came with a prior value (the `existingValue` hook's). Only a removal drops it, and
    /// none adds one later: with ``hasInterimMark`` unset, an entry created without one holds
    /// neither a prior nor an interim value, which ``ContentLoaderState/hasValue(_:)`` reads without
    /// the versions' lock and their types' metadata.
    @usableFromInline let cameWithPrior: Bool
    /// Handed out by ``ContentLoader/loadable(for:)`` (set under the loader's lock, read in
    /// `deinit`, which takes no lock).
    let wasHandedOut = Atomic<Bool>(false)
    /// Refreshed since the value was loaded: the next first claim loads again.
    @exclusivity(unchecked) var isStale = false
    /// A local write set the content: the next sync tells it as a load's result.
    @exclusivity(unchecked) var wrote = false
    /// ``ContentLoader/remove(_:)`` dropped the value: the next sync tells the fresh load, even
    /// one that superseded a load already shown.
    @exclusivity(unchecked) var forgot = false
    /// A refresh came while an attempt ran: start another when it ends, if still claimed.
    @exclusivity(unchecked) var refreshPending = false
    @exclusivity(unchecked) var isInIndex = false
    /// On the idle list (`newer`, `older`).
    @exclusivity(unchecked) var isIdleLinked = false
    /// On the list of idle entries with nothing to show.
    @exclusivity(unchecked) var isIdleEmpty = false

    @inlinable
    init(loader: ContentLoader, key: Key, prior: (value: Value, version: Version)?, source: KeySource) {
      self.key = key
      self.source = source
      self.loader = loader
      self.cameWithPrior = prior != nil
      self.versionsValue = Versions(prior: prior, priorCost: prior.map { source.cost?($0.value) ?? 0 } ?? 0)
      super.init(directLoad: source.specialized.loadKey)
    }

    /// Runs `body` on the versions under their lock (after the loadable's, when both are held).
    @inlinable @inline(__always)
    func withVersions<R>(_ body: (inout Versions) throws -> R) rethrows -> R {
      try versionsLock.withLock(owner: self) { _ in try body(&versionsValue) }
    }

    deinit {
      // Only a loadable handed out is remembered by the loader: the others' deinit takes no lock
      // (a key evicted while its cancelled load's task winds down is released on that task, and
      // took the loader's lock against the thread claiming the next keys).
      guard wasHandedOut.load(ordering: .acquiring) else { return }
      let id = ObjectIdentifier(self)
      let key = key
      loader?.withState { $0.forget(key, id: id) }
    }

    /// Tells the loader of every status change, whoever causes it.
    /// The loader keeps its claims, event streams and idle list in line with the key's status.
    /// A hook rather than an observer: no observer registry to allocate for every key, and no
    /// queued delivery for a loader that reads the current state anyway.
    override func statusDidChange() {
      loader?.changed(self)
    }

    /// The priority of the key's load: the highest among its claims and the attempts that wait
    /// for it (SPEC §5); without claims, ``ClaimPriority/visible`` when a plain caller waits or
    /// nobody does. Under the loader's lock.
    @usableFromInline var loadPriority: ClaimPriority {
      guard let waiting else { return claimsAt.highest ?? .visible }
      let dependents = waiting.plainCallers > 0 ? .visible : waiting.dependentsAt.highest
      if let claims = claimsAt.highest { return max(claims, dependents ?? claims) }
      if waiting.plainCallers > 0 { return .visible }
      return dependents ?? .visible
    }

    override func callerWillWait(_ context: AttemptContext?) -> Bool { demandWillWait(context) }
    override func callerStoppedWaiting(_ context: AttemptContext?) { demandStoppedWaiting(context) }

    /// A key's load is a function of its key: a fresh attempt starts beside a superseded or
    /// cancelled one whose work has not returned (SPEC §5), without the gate.
    override var runsOneAttemptAtATime: Bool { false }

    override func performLoad() async throws -> Value {
      ContentBox<Value>.unbox(try await performLoadBoxed())
    }

    /// The key's load outside an attempt's work (``performLoad()``): for the running attempt.
    nonisolated(nonsending) override func performLoadBoxed() async throws -> AnyContentBox {
      try await loadKey(for: AttemptContext.current?.attemptID ?? withState { $0.attempt?.id })
    }

    /// The key's load for `attempt`, its value boxed where the loader's types are known (see
    /// ``SpecializedPaths/loadAndKeep``): what its attempts run (``SpecializedPaths/loadKey``),
    /// told which attempt they are — also under a timeout, where the load runs in a child task
    /// and the loadable's state names the attempt running *now*, which may be a fresh one that
    /// superseded this one meanwhile.
    @usableFromInline
    nonisolated(nonsending) final func loadKey(for attempt: UInt64?) async throws -> AnyContentBox {
      let loader = loader
      guard let executor = loader?.taskExecutor else { return try await load(limitedBy: loader, attempt: attempt) }
      // An attempt a caller started runs on the caller's executor: the load goes to the loader's
      // (for an attempt the loader launched there already, no hop), and so do the tasks it starts.
      return try await withTaskExecutorPreference(executor) {
        try await TaskLaunch.executor.withValue(executor) { try await self.load(limitedBy: loader, attempt: attempt) }
      }
    }

    /// Waits for a slot of `maximumConcurrentLoads`, if set, then loads.
    private func load(limitedBy loader: ContentLoader?, attempt: UInt64?) async throws -> AnyContentBox {
      guard let loader, let limiter = loader.limiter else { return try await source.specialized.loadAndKeep(self, attempt) }
      let priority = source.specialized.loadPriority(loader, self)
      // The place its claim reserved in the queue, if any, is its attempt's own.
      try await limiter.acquire(slotTicket, attempt: attempt, priority: priority)
      defer { limiter.release(slotTicket) }
      // Its claims hear that it no longer waits for a slot (``Snapshot/isWaitingForSlot``).
      loader.changed(self)
      // The claims may have let go of this attempt while it waited, and its task not be cancelled
      // yet (that comes right after the loader's lock): it is no longer the loadable's attempt, so
      // it gives the slot back without calling the data source.
      guard attempt == nil || withState({ $0.attempt?.id }) == attempt else { throw CancellationError() }
      return try await source.specialized.loadAndKeep(self, attempt)
    }

    /// Calls the data source and applies the version rule. Only the key's current attempt records
    /// the version of what it returns: a superseded or cancelled attempt, which may run beside the
    /// current one (SPEC §5), must not put its version in the place of the one the current attempt
    /// records. Its result is dropped anyway; it throws `CancellationError` instead.
    ///
    /// Inlinable: called through ``SpecializedPaths/loadAndKeep``.
    @inlinable
    func loadAndKeep(attempt: UInt64?) async throws -> Value {
      let loaded: (value: Value, version: Version)
      switch source.load {
      case .plain(let load):
        loaded = try await load(key)
      case .withInterimValues(let load):
        // The link holds this loadable only until the closure returns; a delivery after that is
        // not shown anyway (the version table marks the load returned).
        let link = InterimLink(self)
        defer { _ = link.cut() }
        loaded = try await load(key, InterimValues(link: link, attempt: attempt))
      }
      let now = source.clock?.now() ?? .zero
      let loadedCost = source.cost?(loaded.value) ?? 0
      // Under the loadable's lock, so that no other attempt becomes current between the check and
      // the record (the lock order is the loadable's, then the versions').
      let kept = withState { state -> (Value, [Version])? in
        guard attempt == nil || state.attempt?.id == attempt else { return nil }
        let content = state.content(as: Value.self)
        return withVersions {
          $0.keep(
            loaded, cost: loadedCost, counter: state.contentVersion, content: content, now: now, attempt: attempt)
        }
      }
      guard let (value, dropped) = kept else { throw CancellationError() }
      _ = dropped  // released here, after the locks
      return value
    }

    /// A local write (``ContentLoader/set(_:version:for:)``), under the version rule: `nil` when
    /// refused. Otherwise the loadable's effects — a running attempt superseded, its waiters
    /// answered with the value — to perform after the locks, the versions let go of, and the
    /// interim value the write replaced: the caller holds the loader's lock, so it releases them
    /// with its effects, after that lock too.
    func write(
      _ value: Value, version: Version, cost: Int, now: Duration
    ) -> (LoadStateMachine.Effects, [Version], HeldInterim?)? {
      let box = ContentBox(value)
      // Under the loadable's lock, then the versions' (the order of `loadAndKeep`): no attempt
      // lands between the check and the write.
      return withState { state -> (LoadStateMachine.Effects, [Version], HeldInterim?)? in
        var droppedInterim: HeldInterim?
        let content = state.content(as: Value.self)
        let dropped = withVersions {
          // A write moves the mark only when it replaces an interim value, which an offer put
          // there (and set `hasInterimMark` for).
          $0.write(
            (value, version), cost: cost, counter: state.contentVersion, content: content, now: now,
            dropped: &droppedInterim)
        }
        guard let dropped else { return nil }
        return (state.write(box).effects, dropped, droppedInterim)
      }
    }

    /// ``InterimValues/deliver(_:version:)`` for `attempt`: under the version rule, shown in place
    /// of the value the key shows, while `attempt` is the key's running attempt and has not
    /// returned. Returns whether it was taken.
    func deliverInterim(_ value: Value, version: Version, attempt: UInt64?) -> Bool {
      let valueCost = source.cost?(value) ?? 0
      // Under the loadable's lock, then the versions' (the order of `loadAndKeep`): the attempt
      // is current while the value is taken.
      let (taken, dropped) = withState { state -> (Bool, HeldInterim?) in
        guard state.attempt != nil, attempt == nil || state.attempt?.id == attempt else { return (false, nil) }
        let content = state.content(as: Value.self)
        return withVersions {
          hasInterimMark.store(true, ordering: .releasing)
          return $0.offer(
            (value, version), cost: valueCost, attempt: attempt, counter: state.contentVersion, content: content)
        }
      }
      _ = dropped  // released here, after the locks
      if taken { loader?.changed(self) }
      return taken
    }

    /// ``ContentLoader/remove(_:)``: drops the content, the prior value and the versions, under
    /// the loadable's lock, then the versions'. Returns what the loadable did and the version
    /// table let go of (released by the caller, outside the locks).
    func forgetAll() -> (LoadStateMachine.ForgetAction, Versions) {
      withState { state in
        let table = withVersions { versions -> Versions in
          hasInterimMark.store(true, ordering: .releasing)
          let old = versions
          versions.prior = nil
          versions.priorCost = 0
          versions.slots = InlineFirstArray()
          versions.interim = nil
          versions.interimMark &+= 1
          return old
        }
        return (state.forget(), table)
      }
    }

    /// A caller answered with a value gets that value: a key's content may be dropped
    /// (``ContentLoader/remove(_:)``) between the answer and the caller's return, and the
    /// default check reads the content again then. A key's loadable cannot be subclassed, so
    /// `isContentAvailable` is the default, `content != nil`, which the answer itself tells.
    override func checkedContent(_ content: Value?) throws -> Value {
      guard let content else { throw LoadableError.noContent }
      return content
    }

    /// Stale after a refresh or an invalidation, and when older than the loader's `staleAfter`.
    override var needsSync: Bool {
      if super.needsSync { return true }
      guard let loader else { return false }
      let expiredBefore = loader.expiryThreshold()
      return loader.withState { _ in isStale || isExpired(before: expiredBefore) }
    }

    /// Whether the current content was loaded before `threshold` (under the loader's lock).
    func isExpired(before threshold: Duration?) -> Bool {
      guard let threshold, case let counter = shown.contentVersion, counter > 0 else { return false }
      guard let loadedAt = withVersions({ $0.loadedAt(counter) }) else { return false }
      return loadedAt <= threshold
    }
  }
}

/// What a `ContentLoader` last told the claims and the event streams about a key (`Loader.Shown`).
///
/// Not optional, for a key told nothing yet: it is ``nothing`` (``told`` unset). An optional one,
/// read and copied in the library's unspecialized code, went through its type's run-time value
/// witnesses (its tag, copy and destruction, ~800 instructions a key's claim and end).
struct ShownKeyState {
  /// Nothing told yet: the first sync tells what the key shows, whatever it is.
  static var nothing: ShownKeyState {
    ShownKeyState(status: .notLoaded, contentVersion: 0, attempt: nil, told: false)
  }

  var status: LoadStatus
  var contentVersion: UInt64
  /// The attempt running then; kept to tell, when it is gone, whether it returned.
  var attempt: LoadStateMachine.Attempt?
  /// Whether its load waited for a slot of the load limit.
  var waiting = false
  /// `ContentLoader.Versions.interimMark` then: an interim value delivered since is a change to
  /// tell.
  var interimMark: UInt64 = 0
  /// Whether anything was told (``nothing``'s is `false`).
  var told = true
}
