// A job's observers and the queue that serializes their deliveries (JobObservers), and what each
// one receives (JobDelivery).

/// What an observer of a ``Job`` receives: public events, then the end with the job's result
/// (`nil` when the job was deallocated before it finished).
enum JobDelivery<Output: Sendable>: Sendable {
  case event(JobEvent)
  /// The work saved a checkpoint (for a ``JobManager``, which stores it).
  case checkpointSaved
  case end(Result<Output, any Error>?)
}

/// The observers of one job's events and the queue that serializes their deliveries.
///
/// Deliveries are queued under the job's lock, each for one observer, in the order the changes
/// happen, in a ``DeliveryQueue``: whoever queues into an idle queue becomes the drainer and
/// delivers outside the lock, so handlers run one at a time, in order, and a handler that changes
/// the job only queues more work for the same loop. An observer is dropped once its end was taken
/// for delivery.
struct JobObservers<Output: Sendable> {
  typealias Handler = @Sendable (JobDelivery<Output>) -> Void
  /// A delivery queued for one observer.
  typealias Queued = (observer: UInt64, delivery: JobDelivery<Output>)

  struct Entry: Sendable {
    var handler: Handler
    /// The progress this observer already knows (its snapshot's, then the last step queued):
    /// a progress event at or below it is not queued again.
    var knownProgress: Double = 0
  }

  /// An observer taken out, with the deliveries still queued for it: released after the lock.
  struct Removed: Sendable {
    var entry: Entry
    var pending: [Queued]
  }

  private var entries: [UInt64: Entry] = [:]
  private var queue = DeliveryQueue<Queued>()

  /// Queues `delivery` for every observer (a progress step only for those that do not know it).
  /// Returns `true` when the caller must drain.
  mutating func enqueue(_ delivery: JobDelivery<Output>) -> Bool {
    var fraction: Double?
    if case .event(.progress(let step)) = delivery { fraction = step }
    var drain = false
    for index in entries.indices {
      if let fraction {
        guard entries.values[index].knownProgress < fraction else { continue }
        entries.values[index].knownProgress = fraction
      }
      if queue.append((entries.keys[index], delivery)) { drain = true }
    }
    return drain
  }

  /// Adds an observer with its first deliveries. Returns `true` when the caller must drain.
  mutating func add(_ id: UInt64, _ handler: @escaping Handler, pending: [JobDelivery<Output>], knownProgress: Double) -> Bool {
    entries[id] = Entry(handler: handler, knownProgress: knownProgress)
    return queue.append(contentsOf: pending.lazy.map { (id, $0) })
  }

  /// Removes an observer; its handler and the deliveries still queued for it are released with
  /// the returned value.
  mutating func remove(_ id: UInt64) -> Removed? {
    guard let entry = entries.removeValue(forKey: id) else { return nil }
    return Removed(entry: entry, pending: queue.removeAll { $0.observer == id })
  }

  /// Takes the queued deliveries with their observers' handlers, dropping observers whose last
  /// delivery taken is their end. Returns `nil`, and stops draining, when there is nothing left
  /// to deliver.
  mutating func takeDeliveries() -> [(Handler, JobDelivery<Output>)]? {
    guard let taken = queue.takeBatch() else { return nil }
    var batch: [(Handler, JobDelivery<Output>)] = []
    batch.reserveCapacity(taken.count)
    var ended: [UInt64] = []
    for (id, delivery) in taken {
      // Every queued delivery's observer is registered: one that leaves takes its own out.
      batch.append((entries[id]!.handler, delivery))
      if case .end = delivery {
        if !ended.contains(id) { ended.append(id) }
      } else if !ended.isEmpty, let index = ended.firstIndex(of: id) {
        ended.remove(at: index)
      }
    }
    for id in ended { entries.removeValue(forKey: id) }
    return batch
  }

  /// Removes every observer, for the job's `deinit`; they and the deliveries still queued are
  /// released with the returned value.
  mutating func detachAll() -> (entries: [Entry], pending: DeliveryQueue<Queued>) {
    defer {
      entries.removeAll()
      queue = DeliveryQueue()
    }
    return (Array(entries.values), queue)
  }
}
