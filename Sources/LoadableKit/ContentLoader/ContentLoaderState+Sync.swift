/// What a change of a key's loadable was, as the loader's events tell it.
enum ShownChange {
  case loading, loaded, failed, cancelled, none
  /// The load shown ended — with a result, or failed — and the next one started after it, before
  /// the loader read the key: both are told, the end first (``EndBefore``).
  case loadedThenLoading, failedThenLoading
}

/// Keeping the claims' observers, the event streams and the idle lists in line with each key's
/// loadable, and reading a key's snapshot.
extension ContentLoaderState {
  /// Brings the claims' observers and the event streams up to date with the entry's loadable.
  /// Changes are compared with what was shown last, so each is told once, in order, whoever
  /// notices it first (the loader after changing the entry, or the entry's status hook).
  mutating func sync(_ entry: Entry, _ effects: inout Effects) {
    // Snapshots and events are built only for a key somebody observes (a claim's handler or
    // stream, an event stream). Otherwise one read without copies of user values will do, and
    // this frame holds no value of a type that depends on the loader's generic parameters (each
    // would be looked up at run time).
    if entry.hasSinks || hasEventSinks { return syncObserved(entry, &effects) }
    let previous = entry.shown
    let read = entry.interestState(since: previous.attempt)
    let waiting = waitsForSlot(entry, status: read.status)
    guard record(entry, previous: previous, read, waiting: waiting, &effects) != nil else { return }
    refreshIfPending(entry, attempt: read.attempt, &effects)
  }

  /// ``sync(_:_:)`` for an entry somebody observes: also builds the snapshot and the event.
  private mutating func syncObserved(_ entry: Entry, _ effects: inout Effects) {
    let previous = entry.shown
    let view = entry.interestView(since: previous.attempt)
    effects.released.contents.append(view.snapshot)
    let status = view.snapshot.status
    let read = (
      status: status, contentVersion: view.contentVersion, attempt: view.attempt,
      previousFinished: view.previousFinished,
      failedByCancellation: status == .failed && view.snapshot.error is CancellationError
    )
    let waiting = waitsForSlot(entry, status: status)
    guard let change = record(entry, previous: previous, read, waiting: waiting, &effects) else { return }
    let snapshot = snapshot(of: entry, view.snapshot, contentVersion: view.contentVersion, waiting: waiting)
    effects.released.snapshots.append(snapshot)
    // The end of the load before this one, read together with this one's start: told first.
    switch change {
    case .loadedThenLoading:
      if let value = snapshot.value, let version = snapshot.version {
        var loaded = snapshot
        (loaded.status, loaded.error, loaded.isWaitingForSlot) = (.loaded, nil, false)
        effects.released.snapshots.append(loaded)
        notifyClaims(entry, loaded, &effects)
        emit(.loaded(entry.key, value, version), &effects)
      }
    case .failedThenLoading:
      // A copy, released with the snapshot that holds it, after the lock.
      let error = view.attempt.flatMap(entry.error(before:)) ?? CancellationError()
      var failed = snapshot
      (failed.status, failed.error, failed.isWaitingForSlot) = (.failed, error, false)
      effects.released.snapshots.append(failed)
      notifyClaims(entry, failed, &effects)
      emit(.failed(entry.key, error), &effects)
    default: break
    }
    var event: Event?
    switch change {
    case .loading, .loadedThenLoading, .failedThenLoading:
      if let value = snapshot.value, let version = snapshot.version {
        event = .loadingWithPriorValue(entry.key, value, version)
      } else {
        event = .loading(entry.key)
      }
    case .loaded: event = .loaded(entry.key, snapshot.value!, snapshot.version!)
    case .failed: event = .failed(entry.key, view.snapshot.error ?? CancellationError())
    case .cancelled: event = .cancelled(entry.key)
    case .none: break
    }
    notifyClaims(entry, snapshot, &effects)
    if let event { emit(event, &effects) }
    refreshIfPending(entry, attempt: view.attempt, &effects)
  }

  /// Records what the entry's loadable shows now, when it differs from what was shown last;
  /// returns what the change was (`.none`: a change that is no event), or `nil` when nothing
  /// changed.
  private mutating func record(
    _ entry: Entry, previous: Loader.Shown,
    _ read: (
      status: LoadStatus, contentVersion: UInt64, attempt: Attempt?, previousFinished: Bool,
      failedByCancellation: Bool
    ), waiting: Bool, _ effects: inout Effects
  ) -> ShownChange? {
    // Read before the snapshot is built: a value delivered after this read is shown by the
    // snapshot too, and told again at the next sync (told twice, never missed).
    // Until some interim value or removal moved the mark, it is zero and no interim value is
    // held: nothing to read under the versions' lock (`KeyedLoadable.hasInterimMark`).
    // (No tuple of the two: a tuple holding a generic type is looked up at run time too.)
    let interimMark =
      entry.hasInterimMark.load(ordering: .acquiring) ? takeRetiredInterim(of: entry, at: read.contentVersion, &effects) : 0
    let changed =
      !previous.told || previous.status != read.status || previous.contentVersion != read.contentVersion
      || previous.attempt !== read.attempt || previous.waiting != waiting || previous.interimMark != interimMark
    guard changed else { return nil }
    let wrote = entry.wrote
    entry.wrote = false
    let forgot = entry.forgot
    entry.forgot = false
    if let old = previous.attempt, old !== read.attempt {
      attemptEnded(entry, old, &effects)
      effects.releasedObjects.append(old)
    }
    // An interim value is no change of the loadable's either (it holds results only): the
    // claims' trackers are told of it as of the key's place in the queue.
    if previous.told, previous.waiting != waiting || previous.interimMark != interimMark,
      entry.hasRegistrar.load(ordering: .acquiring)
    {
      enqueueKeyChanged(entry, &effects)
    }
    entry.shown = Loader.Shown(
      status: read.status, contentVersion: read.contentVersion, attempt: read.attempt, waiting: waiting,
      interimMark: interimMark)
    if totalCostLimit != nil { countCost(of: entry, at: read.contentVersion) }
    if let attempt = read.attempt, attempt !== previous.attempt {
      entry.attemptMark = nextUniqueID()
      // The load shown ended and this one started after it, both before this read.
      if !forgot, previous.attempt != nil, previous.status == .loading, read.previousFinished {
        switch entry.end(before: attempt) {
        case .loaded where read.contentVersion != previous.contentVersion: return .loadedThenLoading
        case .failed: return .failedThenLoading
        default: break
        }
      }
      // A load that superseded the one shown (a refresh, SPEC §5) is no change to tell: the key
      // was loading and still is, with the same value.
      // A removal's fresh load is: the value went.
      if !forgot, previous.attempt != nil, previous.status == .loading, read.status == .loading,
        previous.contentVersion == read.contentVersion, previous.interimMark == interimMark
      {
        return nil
      }
      return .loading
    }
    // An interim value delivered by the running load: told as a prior value while loading.
    if read.attempt != nil, read.status == .loading, previous.told, previous.interimMark != interimMark {
      return .loading
    }
    // A local write on a key that was not loading: told as a load's result.
    if wrote, read.attempt == nil, read.status == .loaded, !previous.told || read.contentVersion != previous.contentVersion,
      previous.attempt == nil
    {
      return .loaded
    }
    guard read.attempt == nil, previous.attempt != nil else { return ShownChange.none }
    switch read.status {
    case .loaded where read.contentVersion != previous.contentVersion:
      if entry.attemptMark > entry.refreshMark { entry.isStale = false }
      return .loaded
    case .failed where read.previousFinished && !read.failedByCancellation:
      return .failed
    default:
      return .cancelled
    }
  }

  // `record(_:previous:_:waiting:_:)`'s rarer work, each in a function of its own: the library's
  // unspecialized code looks up the metadata of a generic type it names (the versions, an interim
  // value, a delivery) at run time, ~330 instructions each, when the function that names it is
  // entered — in `record`, three a call, though most keys hold no interim value, are observed by
  // no registrar and count no cost.

  /// The entry's interim mark, taking an interim value that the content retired into `effects`.
  @inline(never)
  private func takeRetiredInterim(of entry: Entry, at counter: UInt64, _ effects: inout Effects) -> UInt64 {
    var interimMark: UInt64 = 0
    let retired = entry.withVersions { versions in
      interimMark = versions.interimMark
      return versions.takeRetiredInterim(at: counter)
    }
    if let retired { effects.released.interims.append(retired) }
    return interimMark
  }

  @inline(never)
  private mutating func enqueueKeyChanged(_ entry: Entry, _ effects: inout Effects) {
    enqueue(.keyChanged(entry), &effects)
  }

  /// Counts the cost of the value the entry shows in the loader's total.
  @inline(never)
  private mutating func countCost(of entry: Entry, at counter: UInt64) {
    let cost = entry.withVersions { $0.shownCost(at: counter) }
    if entry.isInIndex { totalCost += cost - entry.cost }
    entry.cost = cost
  }

  /// A refresh that came while an attempt ran starts once it ended, if the key is still claimed.
  private mutating func refreshIfPending(_ entry: Entry, attempt: Attempt?, _ effects: inout Effects) {
    if attempt == nil, entry.refreshPending, entry.claimCount > 0 {
      entry.refreshPending = false
      entry.isStale = true
      addInterest(entry, starting: .refresh, &effects)
    }
  }

  /// Restores the invariants after a change to `entry`'s claims or attempt:
  /// - the claims hold interest only in the attempt that is running;
  /// - an entry is on the idle list exactly when it has no claims and is not loading;
  /// - the idle list holds at most `maximumIdleCount` entries, and the sweeper runs while it is
  ///   not empty.
  ///
  /// May evict `entry` itself.
  mutating func settle(_ entry: Entry, now: Duration, _ effects: inout Effects) {
    if let held = entry.held, entry.shown.attempt !== held {
      entry.held = nil
      effects.releasedObjects.append(held)
      if let timer = entry.graceTimer {
        entry.graceTimer = nil
        if let task = timer.task { effects.cancelTasks.append(task) }
      }
    }
    let isIdle = entry.claimCount == 0 && entry.shown.status != .loading && entry.graceTimer == nil
    if isIdle && !entry.isIdleLinked {
      linkIdle(entry, now: now)
      evictBeyondCount(&effects)
      if let timeout = idleTimeout, !sweeperRunning, let oldest = oldestIdle {
        sweeperRunning = true
        effects.startSweeper = oldest.idleSince + timeout
      }
    } else if !isIdle && entry.isIdleLinked {
      unlinkIdle(entry)
    } else if isIdle && entry.isIdleLinked && entry.isIdleEmpty && hasValue(entry) {
      // An idle entry that got a value (a local write) leaves the list of entries with nothing
      // to show, evicted first: it is evicted like any idle entry, the least recently used first.
      unlinkIdle(entry)
      linkIdle(entry, now: now)
    }
    evictBeyondCost(&effects)
  }

  // MARK: - Snapshots

  /// The key's snapshot: the loadable's status, content and error, with the prior value from
  /// the `existingValue` hook where there is no content yet, an interim value a load delivered in
  /// place of both, and the versions.
  ///
  /// The loadable's own snapshot is returned too: it holds copies of the content and error, which
  /// the caller must release after the lock (the loadable may let go of its own meanwhile).
  ///
  /// Inlinable, with what it calls: reading a claim's snapshot is what a list's cell does on every
  /// draw, and unspecialized it looked up the metadata of a dozen generic types at run time.
  @inlinable
  func snapshot(of entry: Entry) -> (Snapshot, LoadSnapshot<Value>) {
    let view = entry.interestView(since: nil)
    let waiting = waitsForSlot(entry, status: view.snapshot.status)
    return (snapshot(of: entry, view.snapshot, contentVersion: view.contentVersion, waiting: waiting), view.snapshot)
  }

  /// Whether the key's load waits for a slot of the load limit (a loading key only: without a
  /// limit, or when the key is not loading, no lock is taken).
  @usableFromInline
  func waitsForSlot(_ entry: Entry, status: LoadStatus) -> Bool {
    guard status == .loading, let limiter else { return false }
    return limiter.isWaiting(entry.slotTicket)
  }

  /// ``snapshot(of:)`` whose copies are released with `effects`.
  func snapshot(of entry: Entry, _ effects: inout Effects) -> Snapshot {
    let (snapshot, view) = snapshot(of: entry)
    effects.released.contents.append(view)
    return snapshot
  }

  @inlinable
  func snapshot(of entry: Entry, _ state: LoadSnapshot<Value>, contentVersion: UInt64, waiting: Bool) -> Snapshot {
    let (version, prior, interim) = entry.withVersions {
      ($0.version(at: contentVersion), $0.prior, $0.shownInterim(at: contentVersion))
    }
    if let interim {
      // Newer than the content and the prior value (the version rule took it).
      return Snapshot(
        key: entry.key, status: state.status, value: interim.value, version: interim.version,
        error: state.status == .failed ? state.error ?? CancellationError() : nil, isWaitingForSlot: waiting)
    }
    let value = state.content ?? prior?.value
    let shownVersion = state.content != nil ? version ?? prior?.version : prior?.version
    return Snapshot(
      key: entry.key, status: state.status, value: value, version: value == nil ? nil : shownVersion,
      error: state.status == .failed ? state.error ?? CancellationError() : nil, isWaitingForSlot: waiting)
  }

  @inlinable
  func snapshot(for key: Key) -> (Snapshot, LoadSnapshot<Value>)? {
    index[key].map { snapshot(of: $0) }
  }
}
