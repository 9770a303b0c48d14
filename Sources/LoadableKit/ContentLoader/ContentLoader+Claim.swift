import Synchronization

extension ContentLoader {
  /// A claim on one key of a ``ContentLoader``: while it is active, the key's entry is kept and
  /// its load goes on.
  ///
  /// Get one from ``ContentLoader/begin(_:)``. The claim ends when you call ``end()`` — calling it
  /// again does nothing — or when it is deallocated, whichever comes first; when the last claim on
  /// a key ends, a load the claims started is cancelled (after the loader's grace period). This is
  /// reference counting by lifetime: a claim registers in `begin`, unregisters in `end`/`deinit`,
  /// and can never be ended twice, so claims and ends are always balanced.
  ///
  /// A claim keeps its loader alive.
  public final class Claim: @unchecked Sendable {  // `entry` is touched only under the loader's lock
    /// The key this claim is on.
    public let key: Key
    /// The loader, kept alive while the claim exists by the one reference that all its claims
    /// share (``ContentLoader/claimMade()``), not by one of the claim's own: retaining the loader,
    /// which its keys reference weakly, takes the runtime's slow path (a side table). Unmanaged,
    /// so that the claim's end and its `deinit` use it without a retain (``withLoader(_:)``); the
    /// claim's other members read ``loader``, retained.
    @usableFromInline let unmanagedLoader: Unmanaged<ContentLoader>

    /// The loader (retained for the caller).
    @inlinable var loader: ContentLoader { unmanagedLoader.takeUnretainedValue() }

    /// Runs `body` with the loader, without retaining it: the claim keeps it alive.
    @inlinable @inline(__always)
    func withLoader<R>(_ body: (ContentLoader) -> R) -> R {
      unmanagedLoader._withUnsafeGuaranteedRef(body)
    }

    @usableFromInline let id: UInt64
    /// The key's entry while the claim is active; `nil` once it ended. Under the loader's lock,
    /// as `rank` is: no dynamic exclusivity checks (see `KeyedLoadable`).
    @exclusivity(unchecked) @usableFromInline var entry: KeyedLoadable?
    /// The claim's priority, under the loader's lock.
    @exclusivity(unchecked) @usableFromInline var rank: ClaimPriority
    /// Reports the claim to the instruments; `nil` when none is installed.
    @usableFromInline let probe: ClaimProbe?
    /// Set, under the loader's lock, when the claim ends: its `deinit` then has nothing to do and
    /// takes no lock.
    @usableFromInline let hasEnded = Atomic<Bool>(false)

    /// Inlinable, so that it is specialized for the caller's types. It borrows the loader (an
    /// argument taken at +1 was released again, on the slow path) and, if it is the first claim,
    /// takes the claims' shared reference (``ContentLoader/claimMade()``).
    @inlinable
    init(loader: borrowing ContentLoader, key: Key, id: UInt64, priority: ClaimPriority) {
      // The check inline: without an instrument, no call into the probe's generic code.
      self.probe = LoadInstrumentation.isActive ? Self.beginProbe(loader, key) : nil
      self.id = id
      self.rank = priority
      self.key = key
      loader.claimMade()
      self.unmanagedLoader = Unmanaged.passUnretained(loader)
    }

    @usableFromInline @inline(never)
    static func beginProbe(_ loader: ContentLoader, _ key: Key) -> ClaimProbe? {
      ClaimProbe.begin(loader: loader.name, key: key, own: loader.instrument)
    }

    /// How urgently this claim needs its key; changeable while the claim lives.
    ///
    /// The key's load runs at the highest priority among its claims. Raising it moves a load
    /// that waits for `maximumConcurrentLoads` ahead and raises the priority of a load already
    /// running; lowering it moves a waiting load back (a running task's priority is never
    /// lowered).
    ///
    /// Observable: `withObservationTracking` and SwiftUI see it change.
    public var priority: ClaimPriority {
      get {
        let read: (ClaimPriority, KeyedLoadable?) = loader.withState { _ in (self.rank, self.entry) }
        read.1?.accessClaimPriority()
        return read.0
      }
      set {
        loader.setPriority(self, to: newValue)
        let entry = loader.withState { _ in self.entry }
        entry?.claimPriorityChanged()
      }
    }

    deinit {
      // An ended claim has nothing left to do: no lock, no generic code of the loader's.
      if !hasEnded.load(ordering: .acquiring) { withLoader { $0.end(self) } }
      probe?.end()
      // Last: the last claim's release may free the loader.
      if withLoader({ $0.claimFreed() }) { unmanagedLoader.release() }
    }

    /// Ends the claim. Calling it again, or letting the claim be deallocated afterwards, does
    /// nothing.
    ///
    /// Update streams of this claim finish after the notifications queued before the end;
    /// handlers are not called any more.
    ///
    /// Inlinable, so that ending a claim on a key that other claims still hold — a counter
    /// decremented under the loader's lock — is specialized for the caller's types (see
    /// ``ContentLoader/begin(_:)``).
    @inlinable
    public func end() {
      withLoader { $0.endClaim(self) }
      probe?.end()
    }

    /// Whether the claim has not ended yet.
    public var isActive: Bool {
      loader.withState { _ in entry != nil }
    }

    /// The key's current snapshot. After the claim has ended: the key's current snapshot if the
    /// loader still holds it, otherwise a ``LoadStatus/notLoaded`` one.
    ///
    /// Observable: `withObservationTracking` and SwiftUI see every change of the key while the
    /// claim is active, as its handlers and streams do.
    ///
    /// Inlinable, so that reading it — what a cell does on every draw — is specialized for the
    /// caller's types.
    @inlinable
    public var snapshot: Snapshot {
      // The loadable's snapshot holds copies of user values: released here, after the lock.
      let (read, observed) = loader.withState { state in
        if let entry = self.entry { return (Optional(state.snapshot(of: entry)), Optional(entry)) }
        return (state.snapshot(for: key), state.index[key])
      }
      observed?.accessClaimSnapshot()
      return read?.0 ?? Snapshot(key: key, status: .notLoaded)
    }

    /// The key's snapshots, latest only: see ``updates(bufferingPolicy:)``.
    ///
    /// A consumer that is busy when several changes happen sees the latest of them, which is
    /// what a cell drawing the key needs.
    public var updates: AsyncStream<Snapshot> {
      updates(bufferingPolicy: .bufferingNewest(1))
    }

    /// The key's snapshots: the current one first, then one for every change, in order, until
    /// the claim ends, when the stream finishes.
    ///
    /// Each call makes a new stream. On a claim that has ended, the stream finishes at once
    /// without an element. Ending the iteration unregisters the stream; it does not end the
    /// claim.
    ///
    /// ```swift
    /// let claim = thumbnails.begin(url)
    /// for await snapshot in claim.updates {
    ///   render(snapshot.value, loading: snapshot.status == .loading)
    /// }
    /// ```
    ///
    /// - Parameter bufferingPolicy: What the stream keeps while its consumer is busy;
    ///   `.unbounded` keeps every snapshot.
    public func updates(
      bufferingPolicy: AsyncStream<Snapshot>.Continuation.BufferingPolicy
    ) -> AsyncStream<Snapshot> {
      let (stream, continuation) = AsyncStream.makeStream(of: Snapshot.self, bufferingPolicy: bufferingPolicy)
      guard let (sinkID, effects) = loader.withState({ $0.addSink(.stream(continuation), to: self) }) else {
        continuation.finish()
        return stream
      }
      continuation.onTermination = { [weak self] _ in
        guard let self else { return }
        let removed = self.loader.withState { $0.removeSink(sinkID, from: self) }
        _ = removed  // released outside the lock
      }
      loader.perform(consume effects)
      return stream
    }
  }
}

// MARK: - The claims' one reference to their loader

extension ContentLoader {
  /// A claim was made (by a caller that holds the loader): the first of them retains the loader.
  ///
  /// The transitions from none to one and back alternate in the counter's one order, so the
  /// retains and releases balance, whichever thread makes or frees the claims; a retain that comes
  /// after a concurrent release is made while its caller still holds the loader.
  @inlinable @inline(__always)
  final func claimMade() {
    if claimObjects.wrappingAdd(1, ordering: .relaxed).oldValue == 0 { _ = Unmanaged.passRetained(self) }
  }

  /// A claim was freed. Returns `true` for the last of them, whose caller then releases the
  /// loader (which may free it) and uses it no more. Every freed claim's uses of the loader
  /// happen before that release (the ordering).
  ///
  /// Nothing may read the loader after the decrement, here or in the caller: once it is made,
  /// the last claim, on another thread, may free the loader (the caller's `withLoader(_:)`
  /// promises the loader for the whole call, which holds only because nothing reads it then).
  final func claimFreed() -> Bool {
    claimObjects.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue == 1
  }
}
