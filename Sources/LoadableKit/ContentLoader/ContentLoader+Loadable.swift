extension ContentLoader {
  /// The key's entry as an ``AsyncLoadable``, so keyed content composes with `map`, `zip` and
  /// the other combinators.
  ///
  /// ```swift
  /// let header = zip(avatars.loadable(for: user.id), profiles.loadable(for: user.id))
  /// let (avatar, profile) = try await header.fetchIfNeeded()
  /// ```
  ///
  /// The loadable mirrors the key: it shows ``LoadStatus/loading`` while the key loads (whoever
  /// started the load), and takes the key's value or error when the load ends. Its `content` is
  /// always a value a load produced (or kept by the version check); a prior value from the
  /// `existingValue` hook is visible through claims, ``snapshot(for:)`` and ``events`` only.
  ///
  /// An attempt of the loadable takes a loaded value the loadable has not seen yet, joins the
  /// key's running load, or starts one, and then keeps that load alive until it ends, as if it held
  /// a claim (unless the loadable's `cancelLoad()` is called). The exception is the attempt that
  /// mirrors a load claims started — the one a caller joins when it finds the loadable already
  /// loading: it keeps nothing alive, so when the last claim ends that attempt, and every caller
  /// waiting on it, ends with `CancellationError`, as after `cancelLoad()`.
  ///
  /// Holding the loadable is not a claim and keeps no entry: the entry may be evicted. The
  /// loadable keeps working — loading it makes a new entry — and this method returns the same
  /// instance for as long as something holds it.
  ///
  /// - Complexity: O(1).
  public func loadable(for key: Key) -> AsyncLoadable<Value> {
    if let existing = withState({ $0.liveLoadable(for: key) }) { return existing }
    let fresh = KeyedLoadable(loader: self, key: key)
    let (loadable, effects) = withState { $0.register(fresh) }
    perform(effects)
    return loadable
  }

  /// The loadable of one key: its attempts go through the loader.
  final class KeyedLoadable: AsyncLoadable<Value>, @unchecked Sendable {
    let loader: ContentLoader
    let key: Key

    init(loader: ContentLoader, key: Key) {
      self.loader = loader
      self.key = key
      super.init()
    }

    deinit {
      let id = ObjectIdentifier(self)
      loader.withState { $0.unregister(key, id: id) }
    }

    override func performLoad() async throws -> Value {
      try await loader.attempt(of: self)
    }
  }

  /// One attempt of a key's loadable: see `ContentLoaderStateMachine.arrive(…)`.
  func attempt(of loadable: KeyedLoadable) async throws -> Value {
    let key = loadable.key
    let id = ObjectIdentifier(loadable)
    let waiterID = nextUniqueID()
    let result = await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: StateMachine.Waiter) in
        var prior = StateMachine.PriorLookup.notFetched
        while true {
          let now = currentTime()
          // Read under the lock: a cancellation whose handler ran before this point is seen here,
          // and one after it finds the waiter registered.
          let arrival = withState {
            $0.arrive(
              key, loadable: id, waiterID: waiterID, continuation: continuation, isCancelled: Task.isCancelled,
              prior: prior, now: now)
          }
          switch arrival {
          case .needsPrior:
            prior = .fetched(existingValue(key))
          case .done(let effects):
            perform(effects)
            return
          }
        }
      }
    } onCancel: {
      let now = currentTime()
      perform(withState { $0.cancelWaiter(key, waiterID: waiterID, now: now) })
    }
    return try result.get()
  }

  /// Makes `loadable` mirror its entry: its next attempt takes the entry's state.
  ///
  /// When the loadable is not loading, `sync()` starts that attempt (or a caller's attempt that
  /// started in between serves). When it is loading, the attempt under way may already be past
  /// `performLoad()`, so a task waits for it to end and then tries again.
  func poke(_ loadable: KeyedLoadable) {
    if loadable.loadStatus != .loading {
      loadable.sync()
      return
    }
    let id = ObjectIdentifier(loadable)
    guard withState({ $0.claimDriver(loadable.key, id: id) }) else { return }
    TaskLaunch.startDetached { [self] in
      while loadable.loadStatus == .loading {
        try? await loadable.load()
      }
      if withState({ $0.releaseDriver(loadable.key, id: id) }) {
        poke(loadable)
      }
    }
  }
}
