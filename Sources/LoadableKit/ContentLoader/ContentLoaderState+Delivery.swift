import Synchronization

extension ContentLoader {
  /// A per-claim handler; switched off when its claim ends, so a notification still queued for it
  /// is not delivered after `end()` (one already being delivered may finish).
  @usableFromInline
  final class Handler: Sendable {
    let call: @Sendable (Snapshot) -> Void
    let isActive = Atomic<Bool>(true)
    init(_ call: @escaping @Sendable (Snapshot) -> Void) { self.call = call }
  }

  /// Where a claim's snapshots go.
  @usableFromInline
  enum Sink: Sendable {
    case stream(AsyncStream<Snapshot>.Continuation)
    case handler(Handler)
  }

  @usableFromInline
  struct ClaimSink: Sendable {
    var id: UInt64
    var sink: Sink
  }

  /// A notification, queued under the lock in the order of the changes and delivered outside it.
  enum Delivery: Sendable {
    /// A snapshot for a claim's observer; `first` is the one queued when the observer was added,
    /// delivered even when the claim ended before it could be.
    case snapshot(Sink, Snapshot, first: Bool = false)
    case finish(AsyncStream<Snapshot>.Continuation)
    case event(AsyncStream<Event>.Continuation, Event)
    case finishEvents(AsyncStream<Event>.Continuation)
    /// A change of the key that its loadable's observers are not told of (its place in the load
    /// limit's queue): the claims' `withObservationTracking` is (``ContentLoader/Claim`` is
    /// `Observable` through the key's loadable).
    case keyChanged(KeyedLoadable)
  }
}

/// Claims' observers and event streams, and their notifications: queued under the lock in the
/// order of the changes, in the loader's ``DeliveryQueue`` (`outbox`); whoever queues into an idle
/// queue delivers it outside the lock (`ContentLoader.drain()`), so every observer sees the
/// changes in order, one call at a time.
extension ContentLoaderState {
  mutating func addEventSink(_ continuation: AsyncStream<Event>.Continuation) -> UInt64? {
    if isShutDown { return nil }
    let id = nextUniqueID()
    eventSinks[id] = continuation
    hasEventSinks = true
    return id
  }

  mutating func removeEventSink(_ id: UInt64) -> AsyncStream<Event>.Continuation? {
    defer { hasEventSinks = !eventSinks.isEmpty }
    return eventSinks.removeValue(forKey: id)
  }

  /// Adds an observer to an active claim and queues the current snapshot for it. Returns `nil`
  /// when the claim has ended.
  mutating func addSink(_ sink: Loader.Sink, to claim: Loader.Claim) -> (UInt64, Effects)? {
    guard let entry = claim.entry else { return nil }
    var effects = Effects()
    sync(entry, &effects)  // as `observe` does
    let id = nextUniqueID()
    entry.sinks[claim.id, default: []].append(Loader.ClaimSink(id: id, sink: sink))
    entry.hasSinks = true
    enqueue(.snapshot(sink, snapshot(of: entry, &effects), first: true), &effects)
    return (id, effects)
  }

  /// A claim's update stream was terminated by its consumer; the sink is returned to be released
  /// after the lock.
  mutating func removeSink(_ sinkID: UInt64, from claim: Loader.Claim) -> Loader.ClaimSink? {
    guard let entry = claim.entry, let index = entry.sinks[claim.id]?.firstIndex(where: { $0.id == sinkID }) else {
      return nil
    }
    return entry.sinks[claim.id]!.remove(at: index)
  }

  mutating func notifyClaims(_ entry: Entry, _ snapshot: Snapshot, _ effects: inout Effects) {
    for sinks in entry.sinks.values {
      for sink in sinks { enqueue(.snapshot(sink.sink, snapshot), &effects) }
    }
  }

  mutating func emit(_ event: Event, _ effects: inout Effects) {
    for sink in eventSinks.values { enqueue(.event(sink, event), &effects) }
  }

  mutating func close(_ sink: Loader.Sink, _ effects: inout Effects) {
    switch sink {
    case .stream(let continuation): enqueue(.finish(continuation), &effects)
    case .handler(let handler): handler.isActive.store(false, ordering: .releasing)
    }
  }

  mutating func enqueue(_ delivery: Loader.Delivery, _ effects: inout Effects) {
    if outbox.append(delivery) { effects.drain = true }
  }
}
