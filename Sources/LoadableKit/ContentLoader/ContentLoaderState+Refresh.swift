/// Refreshing and invalidating keys: a running load is superseded by a fresh one at once, a
/// claimed key loads again, an idle one is marked stale for its next first claim.
extension ContentLoaderState {
  /// `refresh(key)`: the value is out of date. A running load (it may predate the change) is
  /// superseded by a fresh one at once; a claimed entry loads again at once. An idle one is
  /// marked stale and loads at its next first claim (or its loadable's next `fetchIfNeeded()`).
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

  /// `refresh(where:)` (`loading`) and `invalidate(where:)`, for the keys the predicate chose.
  mutating func refresh(_ keys: [Key], loading: Bool) -> Effects {
    var effects = Effects()
    for key in keys {
      guard let entry = index[key] else { continue }
      if loading {
        refresh(entry, &effects)
      } else {
        entry.isStale = true
        entry.refreshMark = nextUniqueID()
      }
    }
    return effects
  }

  mutating func refresh(_ entry: Entry, _ effects: inout Effects) {
    entry.isStale = true
    entry.refreshMark = nextUniqueID()
    let loading = entry.statusMirror.load(ordering: .acquiring) == LoadStatus.loading.code
    guard entry.claimCount > 0 || loading else { return }
    ContentLoaderSeams.beforeRefreshActs.current?()
    // One step under the key's lock decides, not a status read before it: a running load —
    // whoever started it, and maybe before the change — is superseded by a fresh one at once
    // (SPEC §5: nothing waits behind a stale load); with none running, a claimed key starts one.
    switch entry.supersede(intent: .refresh) {
    case .coalesced:
      // The running load counts as this refresh's: its work starts after it, so once it lands
      // the key is fresh again (seen after the mark set above, as a fresh load is).
      entry.attemptMark = nextUniqueID()
    case .superseded(let fresh, let superseded, let stateEffects):
      // The claims' interest moved with the waiters.
      if entry.held === superseded { entry.held = fresh }
      effects.releasedObjects.append(superseded)
      effects.record(stateEffects, of: entry)
      reserveSlot(for: entry, attempt: fresh)
      effects.launches.append(EntryLaunch(entry: entry, attempt: fresh, event: nil))
      ContentLoaderSeams.afterLoadSuperseded.current?()
      sync(entry, &effects)
      givePlaceBackIfEnded(entry, fresh, &effects)
    case .idle:
      guard entry.claimCount > 0 else { return }
      let previous = entry.held
      entry.held = nil
      // Pending before the step: if a load starts within it (on another thread, between the
      // decision and the interest), the read of the key finds the refresh pending and starts it.
      entry.refreshPending = true
      ContentLoaderSeams.afterRefreshFoundNoLoad.current?()
      if addInterest(entry, starting: .refresh, &effects) { entry.refreshPending = false }
      if let previous {
        effects.record(entry.removeInterest(from: previous), of: entry)
        effects.releasedObjects.append(previous)
      }
    }
  }
}

/// `refresh(matching:)` and `invalidate(matching:)`: the predicate sees each key's snapshot, and
/// runs outside the lock. The snapshots are taken in one step under the lock; each key chosen is
/// acted on, in a second step, only if its state is still the one its snapshot showed.
extension ContentLoaderState {
  /// What a key's snapshot was taken from: compared when the key is acted on.
  struct Stamp {
    var status: LoadStatus
    var contentVersion: UInt64
    var attempt: Attempt?
    var waiting: Bool
    /// Interim values taken and dropped (``ContentLoader/Versions/interimMark``).
    var interimMark: UInt64

    func matches(_ other: Stamp) -> Bool {
      status == other.status && contentVersion == other.contentVersion && attempt === other.attempt
        && waiting == other.waiting && interimMark == other.interimMark
    }
  }

  /// Every entry's snapshot, in one step. The loadables' own snapshots (copies of user values)
  /// are returned too, to be released by the caller after the lock.
  func takeSnapshots() -> [(entry: Entry, snapshot: Snapshot, view: LoadSnapshot<Value>, stamp: Stamp)] {
    index.values.map { entry in
      let view = entry.interestView(since: nil)
      let waiting = waitsForSlot(entry, status: view.snapshot.status)
      let interimMark = entry.withVersions { $0.interimMark }
      let snapshot = snapshot(of: entry, view.snapshot, contentVersion: view.contentVersion, waiting: waiting)
      let stamp = Stamp(
        status: view.snapshot.status, contentVersion: view.contentVersion, attempt: view.attempt, waiting: waiting,
        interimMark: interimMark)
      return (entry, snapshot, view.snapshot, stamp)
    }
  }

  /// The entry's stamp now.
  func stamp(of entry: Entry) -> Stamp {
    let read = entry.interestState(since: nil)
    return Stamp(
      status: read.status, contentVersion: read.contentVersion, attempt: read.attempt,
      waiting: waitsForSlot(entry, status: read.status),
      interimMark: entry.withVersions { $0.interimMark })
  }

  /// Refreshes (`loading`) or invalidates each chosen entry that is still the key's entry and
  /// whose state is still the one its snapshot showed. Returns the keys acted on.
  mutating func refresh(chosen: [(entry: Entry, stamp: Stamp)], loading: Bool) -> ([Key], Effects) {
    var effects = Effects()
    var acted: [Key] = []
    for (entry, stamp) in chosen {
      guard index[entry.key] === entry, self.stamp(of: entry).matches(stamp) else { continue }
      acted.append(entry.key)
      if loading {
        refresh(entry, &effects)
      } else {
        entry.isStale = true
        entry.refreshMark = nextUniqueID()
      }
    }
    return (acted, effects)
  }
}
