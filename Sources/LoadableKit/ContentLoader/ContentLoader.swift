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
/// - **Versions.** Every result carries a `Comparable` version. A result whose version is older
///   than or equal to the value held does not replace it, so a slow, stale response never
///   overwrites a newer one.
/// - **Failures and cancellations are not sticky.** A key whose load failed or was cancelled
///   loads again at its next first claim (or at ``refresh(_:)``).
/// - **Observation.** Each claim delivers its key's ``Snapshot``s (``Claim/updates`` or a handler),
///   and ``events`` delivers every change to every key, delegate-style.
/// - **Composition.** ``loadable(for:)`` gives each key an ``AsyncLoadable``, so keyed content
///   composes with `map`, `zip` and the other combinators.
/// - **Bounded memory.** An entry without claims is idle. Idle entries are evicted, least
///   recently used first, beyond ``init(gracePeriod:idleTimeout:maximumIdleCount:clock:existingValue:load:)``'s
///   `maximumIdleCount` and after its `idleTimeout`, measured on the injected clock.
///
/// The loader is thread-safe without actor isolation. Its state is a value held in a `Mutex`;
/// loads, hooks, handlers and stream continuations always run after the lock is released, and
/// notifications are queued under the lock and delivered in that order. Beginning and ending a
/// claim is O(1).
///
/// See <doc:LoadingKeyedContent> for the detailed design.
public final class ContentLoader<Key: Hashable & Sendable, Value: Sendable, Version: Comparable & Sendable>: Sendable {
  typealias StateMachine = ContentLoaderStateMachine<Key, Value, Version>

  let state: Mutex<StateMachine>
  let loadValue: @Sendable (Key) async throws -> (value: Value, version: Version)
  let existingValue: @Sendable (Key) -> (value: Value, version: Version)?
  let timeline: Timeline
  let gracePeriod: Duration
  let tracksIdleTime: Bool

  /// Creates a loader.
  ///
  /// - Parameters:
  ///   - gracePeriod: How long a load goes on after the last claim on its key ended, so that a
  ///     key claimed again at once — a reused cell — does not restart its load. The default,
  ///     `.zero`, cancels at once. A negative value counts as `.zero`.
  ///   - idleTimeout: How long an entry may stay idle (without claims or loads) before it is
  ///     evicted; `nil` never evicts by time. A negative value counts as `.zero`.
  ///   - maximumIdleCount: How many idle entries are kept; beyond it the least recently used are
  ///     evicted at once. `0` evicts every entry as soon as it is idle. A negative value counts
  ///     as `0`.
  ///   - clock: The clock that measures `gracePeriod` and `idleTimeout`. Tests pass a
  ///     `TestClock` from `LoadableKitTesting`.
  ///   - existingValue: The data source's synchronous hook for a value that exists already
  ///     (a memory or disk cache), with its version, or `nil`. It is called, outside any lock,
  ///     when an entry is made for a key; the value is shown while the first load runs.
  ///   - load: The data source's load of one key, returning the value and its version. It runs in
  ///     its own task, which is cancelled when nobody needs the result any more: check for
  ///     cancellation (or use APIs that do) so cancelled work stops early. Its result is dropped
  ///     once cancelled.
  public init(
    gracePeriod: Duration = .zero,
    idleTimeout: Duration? = .seconds(300),
    maximumIdleCount: Int = 500,
    clock: any Clock<Duration> = ContinuousClock(),
    existingValue: @escaping @Sendable (Key) -> (value: Value, version: Version)? = { _ in nil },
    load: @escaping @Sendable (Key) async throws -> (value: Value, version: Version)
  ) {
    let gracePeriod = max(gracePeriod, .zero)
    let idleTimeout = idleTimeout.map { max($0, .zero) }
    state = Mutex(
      StateMachine(gracePeriod: gracePeriod, idleTimeout: idleTimeout, maximumIdleCount: max(maximumIdleCount, 0)))
    self.gracePeriod = gracePeriod
    tracksIdleTime = idleTimeout != nil
    timeline = Timeline(clock)
    self.existingValue = existingValue
    self.loadValue = load
  }

  deinit {
    // No claim and no keyed loadable is left (each holds the loader), so nothing waits on us.
    perform(withState { $0.shutdown() })
  }

  // MARK: - Claims

  /// Claims `key`: the first claim on a key starts its load.
  ///
  /// While a key has claims its entry is kept and a running load goes on. When the last claim
  /// ends, the load still running is cancelled (after the grace period). A key that is loaded
  /// and not stale is not loaded again by a new claim; a key that never loaded, failed, was
  /// cancelled or was refreshed is.
  ///
  /// - Complexity: O(1). For a key without an entry, the data source's `existingValue` hook is
  ///   called once, outside the lock.
  public func begin(_ key: Key) -> Claim {
    begin(key, sink: nil)
  }

  /// Claims `key`, like ``begin(_:)``, and calls `onUpdate` with the key's current snapshot,
  /// then with every change until the claim ends.
  ///
  /// Calls are made one at a time, in order, never under the loader's lock. The first call
  /// usually happens before this method returns (so a cell shows a prior value without a blank
  /// frame); it happens later when another thread is delivering notifications at that moment.
  /// After ``Claim/end()`` no further call starts, though one already under way on another
  /// thread may finish. The handler may call back into the loader; it should not capture its own
  /// claim strongly unless it ends the claim explicitly.
  public func begin(_ key: Key, onUpdate: @escaping @Sendable (Snapshot) -> Void) -> Claim {
    begin(key, sink: .handler(StateMachine.Handler(onUpdate)))
  }

  func begin(_ key: Key, sink: StateMachine.Sink?) -> Claim {
    var prior = StateMachine.PriorLookup.notFetched
    while true {
      switch withState({ $0.begin(key, sink: sink, prior: prior) }) {
      case .needsPrior:
        prior = .fetched(existingValue(key))
      case .begun(let entry, let claimID, let effects):
        perform(effects)
        return Claim(loader: self, key: key, entry: entry, id: claimID)
      }
    }
  }

  func end(_ entry: StateMachine.Entry, claimID: UInt64) {
    let now = currentTime()
    perform(withState { $0.end(entry, claimID: claimID, now: now) })
  }

  // MARK: - Reading and refreshing

  /// The key's current snapshot, or `nil` when the loader holds no entry for it.
  public func snapshot(for key: Key) -> Snapshot? {
    withState { $0.snapshot(for: key) }
  }

  /// The number of entries the loader holds: claimed, loading and idle.
  ///
  /// Claimed and loading entries are never evicted; idle ones are bounded by `maximumIdleCount`.
  public var count: Int {
    withState { $0.count }
  }

  /// Marks `key`'s value out of date.
  ///
  /// When somebody needs the key (a claim, or a caller loading through ``loadable(for:)``), a
  /// new load starts at once. A load already running is not cancelled — it may return data from
  /// before the change, or the newest — and both results go through the version check, so the
  /// newer wins. (At most two loads of a key run at once: a third refresh cancels the oldest.)
  /// An idle entry loads again at its next first claim. Does nothing for a key without an entry.
  public func refresh(_ key: Key) {
    perform(withState { $0.refresh(key) })
  }

  /// ``refresh(_:)`` for every key the loader holds.
  ///
  /// - Complexity: O(n) in the number of entries.
  public func refreshAll() {
    perform(withState { $0.refreshAll() })
  }

  // MARK: - Observing

  /// Every change to every key, delegate-style: each access makes a new stream that receives
  /// the changes from then on, in order, one event per change, with an unbounded buffer.
  ///
  /// The stream finishes when the loader is deallocated; ending the iteration unregisters it.
  public var events: AsyncStream<Event> {
    let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    if let id = withState({ $0.addEventSink(continuation) }) {
      continuation.onTermination = { [weak self] _ in self?.withState { $0.removeEventSink(id) } }
    } else {
      continuation.finish()
    }
    return stream
  }

  // MARK: - Effects

  /// Runs `body` on the state under the lock (made visible to ThreadSanitizer).
  func withState<Result>(_ body: (inout sending StateMachine) -> sending Result) -> sending Result {
    state.withLock(owner: self, body)
  }

  /// The time for the idle list, read before taking the lock; only needed with an idle timeout.
  func currentTime() -> Duration {
    tracksIdleTime ? timeline.now() : .zero
  }

  /// Performs what the state machine asked for, after the lock was released.
  func perform(_ effects: StateMachine.Effects) {
    for task in effects.cancelTasks { task.cancel() }
    for start in effects.startLoads { launchLoad(start) }
    for timer in effects.startTimers { launchGraceTimer(timer) }
    if let deadline = effects.startSweeper { launchSweeper(firstDeadline: deadline) }
    for (continuation, result) in effects.resumes { continuation.resume(returning: result) }
    for loadable in effects.pokes { poke(loadable) }
    if effects.drain { drain() }
    // `effects.released`, `releasedValues` and `retained` are released here, outside the lock.
  }

  /// Delivers queued notifications until the queue is empty. Only one caller delivers at a time
  /// (the one whose change found the queue idle), so every observer sees changes in order.
  func drain() {
    while let batch = withState({ $0.takeOutbox() }) {
      for delivery in batch {
        switch delivery {
        case .snapshot(.stream(let continuation), let snapshot):
          continuation.yield(snapshot)
        case .snapshot(.handler(let handler), let snapshot):
          if handler.isActive.load(ordering: .acquiring) { handler.call(snapshot) }
        case .finish(let continuation):
          continuation.finish()
        case .event(let continuation, let event):
          continuation.yield(event)
        case .finishEvents(let continuation):
          continuation.finish()
        }
      }
    }
  }

  /// Runs one load of a key in its own task (detached, so it inherits no task-local state from
  /// whoever happened to claim the key first).
  func launchLoad(_ start: StateMachine.StartLoad) {
    let load = loadValue
    let entry = start.entry
    let id = start.id
    let key = entry.key
    let task = TaskLaunch.startDetached(priority: Task.currentPriority) { [weak self] in
      let result: StateMachine.LoadResult
      do {
        result = .success(try await load(key))
      } catch {
        result = .failure(error)
      }
      guard let self else { return }
      let now = self.currentTime()
      self.perform(self.withState { $0.finish(entry, load: id, with: result, now: now) })
    }
    if withState({ $0.attach(task, toLoad: id, of: entry) }) { task.cancel() }
  }

  func launchGraceTimer(_ timer: StateMachine.StartTimer) {
    let timeline = timeline
    let deadline = timeline.now() + gracePeriod
    let entry = timer.entry
    let id = timer.id
    let task = TaskLaunch.startDetached(priority: Task.currentPriority) { [weak self] in
      do { try await timeline.sleepUntil(deadline) } catch { return }
      guard let self else { return }
      let now = self.currentTime()
      self.perform(self.withState { $0.graceExpired(entry, id: id, now: now) })
    }
    if withState({ $0.attachTimer(task, to: entry, id: id) }) { task.cancel() }
  }

  /// One task evicts entries by idle time: the idle list is ordered by the time each entry went
  /// idle, so it only ever needs to wake for the oldest one.
  func launchSweeper(firstDeadline: Duration) {
    let timeline = timeline
    let task = TaskLaunch.startDetached { [weak self] in
      var deadline = firstDeadline
      while true {
        do { try await timeline.sleepUntil(deadline) } catch { return }
        guard let next = Self.sweep(self, now: timeline.now()) else { return }
        deadline = next
      }
    }
    if withState({ $0.attachSweeper(task) }) { task.cancel() }
  }

  private static func sweep(_ loader: ContentLoader?, now: Duration) -> Duration? {
    guard let loader else { return nil }
    let (next, effects) = loader.withState { $0.sweep(now: now) }
    loader.perform(effects)
    return next
  }
}
