/// Keeping the claims' observers, the event streams and the idle lists in line with each key's
/// loadable, and reading a key's snapshot.
extension ContentLoaderState {
  /// Brings the claims' observers and the event streams up to date with the entry's loadable.
  /// Changes are compared with what was shown last, so each is told once, in order, whoever
  /// notices it first (the loader after changing the entry, or the entry's status observer).
  mutating func sync(_ entry: Entry, _ effects: inout Effects) {
    let previous = entry.shown
    let view = entry.interestView(since: previous?.attempt)
    effects.released.contents.append(view.snapshot)
    let status = view.snapshot.status
    let changed =
      previous == nil || previous!.status != status || previous!.contentVersion != view.contentVersion
      || previous!.attempt !== view.attempt
    guard changed else { return }
    if let old = previous?.attempt, old !== view.attempt {
      attemptEnded(entry, old, &effects)
      effects.released.attempts.append(old)
    }
    entry.shown = Loader.Shown(status: status, contentVersion: view.contentVersion, attempt: view.attempt)
    if totalCostLimit != nil {
      let cost = entry.versions.withLock(owner: entry) { $0.cost(at: view.contentVersion) }
      if entry.isInIndex { totalCost += cost - entry.cost }
      entry.cost = cost
    }
    let snapshot = snapshot(of: entry, view.snapshot, contentVersion: view.contentVersion)
    effects.released.snapshots.append(snapshot)
    var event: Event?
    if let attempt = view.attempt, attempt !== previous?.attempt {
      if let value = snapshot.value, let version = snapshot.version {
        event = .loadingWithPriorValue(entry.key, value, version)
      } else {
        event = .loading(entry.key)
      }
      entry.attemptMark = makeID()
    } else if view.attempt == nil, let previous, previous.attempt != nil {
      switch status {
      case .loaded where view.contentVersion != previous.contentVersion:
        event = .loaded(entry.key, snapshot.value!, snapshot.version!)
        if entry.attemptMark > entry.refreshMark { entry.isStale = false }
      case .failed where view.previousFinished && !(view.snapshot.error is CancellationError):
        event = .failed(entry.key, view.snapshot.error ?? CancellationError())
      default:
        event = .cancelled(entry.key)
      }
    }
    notifyClaims(entry, snapshot, &effects)
    if let event { emit(event, &effects) }
    if view.attempt == nil, entry.refreshPending, entry.claimCount > 0 {
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
    if let held = entry.held, entry.shown?.attempt !== held {
      entry.held = nil
      effects.released.attempts.append(held)
      if let timer = entry.graceTimer {
        entry.graceTimer = nil
        if let task = timer.task { effects.cancelTasks.append(task) }
      }
    }
    let isIdle = entry.claimCount == 0 && entry.shown?.status != .loading && entry.graceTimer == nil
    if isIdle && !entry.isIdleLinked {
      linkIdle(entry, now: now)
      evictBeyondCount(&effects)
      if let timeout = idleTimeout, !sweeperRunning, let oldest = oldestIdle {
        sweeperRunning = true
        effects.startSweeper = oldest.idleSince + timeout
      }
    } else if !isIdle && entry.isIdleLinked {
      unlinkIdle(entry)
    }
    evictBeyondCost(&effects)
  }

  // MARK: - Snapshots

  /// The key's snapshot: the loadable's status, content and error, with the prior value from
  /// the `existingValue` hook where there is no content yet, and the versions.
  ///
  /// The loadable's own snapshot is returned too: it holds copies of the content and error, which
  /// the caller must release after the lock (the loadable may let go of its own meanwhile).
  func snapshot(of entry: Entry) -> (Snapshot, LoadSnapshot<Value>) {
    let view = entry.interestView(since: nil)
    return (snapshot(of: entry, view.snapshot, contentVersion: view.contentVersion), view.snapshot)
  }

  /// ``snapshot(of:)`` whose copies are released with `effects`.
  func snapshot(of entry: Entry, _ effects: inout Effects) -> Snapshot {
    let (snapshot, view) = snapshot(of: entry)
    effects.released.contents.append(view)
    return snapshot
  }

  func snapshot(of entry: Entry, _ state: LoadSnapshot<Value>, contentVersion: UInt64) -> Snapshot {
    let (version, prior) = entry.versions.withLock(owner: entry) { ($0.version(at: contentVersion), $0.prior) }
    let value = state.content ?? prior?.value
    let shownVersion = state.content != nil ? version ?? prior?.version : prior?.version
    return Snapshot(
      key: entry.key, status: state.status, value: value, version: value == nil ? nil : shownVersion,
      error: state.status == .failed ? state.error ?? CancellationError() : nil)
  }

  func snapshot(for key: Key) -> (Snapshot, LoadSnapshot<Value>)? {
    index[key].map { snapshot(of: $0) }
  }
}
