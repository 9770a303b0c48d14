extension ContentLoader {
  /// A claim on one key of a ``ContentLoader``: while it is active, the key's entry is kept and
  /// its load goes on.
  ///
  /// Get one from ``ContentLoader/begin(_:)``. The claim ends when you call ``end()`` — calling it
  /// again does nothing — or when it is deallocated, whichever comes first; when the last claim on
  /// a key ends, the key's running load is cancelled (after the loader's grace period). This is
  /// reference counting by lifetime: a claim registers in `begin`, unregisters in `end`/`deinit`,
  /// and can never be ended twice, so claims and ends are always balanced.
  ///
  /// A claim keeps its loader alive.
  public final class Claim: Sendable {
    /// The key this claim is on.
    public let key: Key
    let loader: ContentLoader
    let entry: StateMachine.Entry
    let id: UInt64

    init(loader: ContentLoader, key: Key, entry: StateMachine.Entry, id: UInt64) {
      self.loader = loader
      self.key = key
      self.entry = entry
      self.id = id
    }

    deinit {
      loader.end(entry, claimID: id)
    }

    /// Ends the claim. Calling it again, or letting the claim be deallocated afterwards, does
    /// nothing.
    ///
    /// Update streams of this claim finish after the notifications queued before the end;
    /// handlers are not called any more.
    public func end() {
      loader.end(entry, claimID: id)
    }

    /// Whether the claim has not ended yet.
    public var isActive: Bool {
      loader.withState { $0.isActive(entry, claimID: id) }
    }

    /// The key's current snapshot. After the claim has ended: the key's current snapshot if the
    /// loader still holds it, otherwise a ``LoadStatus/notLoaded`` one.
    public var snapshot: Snapshot {
      loader.withState { $0.snapshot(of: entry, claimID: id) }
    }

    /// The key's snapshots: the current one first, then one for every change, in order, until
    /// the claim ends, when the stream finishes.
    ///
    /// Each access makes a new stream with an unbounded buffer. On a claim that has ended, the
    /// stream finishes at once without an element. Ending the iteration unregisters the stream;
    /// it does not end the claim.
    ///
    /// ```swift
    /// let claim = thumbnails.begin(url)
    /// for await snapshot in claim.updates {
    ///   render(snapshot.value, loading: snapshot.status == .loading)
    /// }
    /// ```
    public var updates: AsyncStream<Snapshot> {
      let (stream, continuation) = AsyncStream.makeStream(of: Snapshot.self, bufferingPolicy: .unbounded)
      let entry = entry
      let claimID = id
      let added = loader.withState { $0.addSink(.stream(continuation), to: entry, claimID: claimID) }
      guard let (sinkID, effects) = added else {
        continuation.finish()
        return stream
      }
      continuation.onTermination = { [weak loader] _ in
        loader?.withState { $0.removeSink(sinkID, from: entry, claimID: claimID) }
      }
      loader.perform(effects)
      return stream
    }
  }
}
