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
/// Deliveries are queued per observer under the job's lock, in the order the changes happen;
/// whoever queues into an idle registry becomes the drainer and delivers outside the lock, so
/// handlers run one at a time, in order, and a handler that changes the job only queues more work
/// for the same loop. An observer is dropped once its end was taken for delivery.
struct JobObservers<Output: Sendable> {
  typealias Handler = @Sendable (JobDelivery<Output>) -> Void

  struct Entry: Sendable {
    var handler: Handler
    var pending: [JobDelivery<Output>]
    /// The progress this observer already knows (its snapshot's, then the last step queued):
    /// a progress event at or below it is not queued again.
    var knownProgress: Double = 0
  }

  private var entries: [UInt64: Entry] = [:]
  private var isDraining = false

  var isEmpty: Bool { entries.isEmpty }

  /// Queues `delivery` for every observer. Returns `true` when the caller must drain.
  mutating func enqueue(_ delivery: JobDelivery<Output>) -> Bool {
    guard !entries.isEmpty else { return false }
    if case .event(.progress(let fraction)) = delivery {
      var queued = false
      for index in entries.indices where entries.values[index].knownProgress < fraction {
        entries.values[index].knownProgress = fraction
        entries.values[index].pending.append(delivery)
        queued = true
      }
      return queued && startDraining()
    }
    for index in entries.indices { entries.values[index].pending.append(delivery) }
    return startDraining()
  }

  /// Adds an observer with its first deliveries. Returns `true` when the caller must drain.
  mutating func add(_ id: UInt64, _ handler: @escaping Handler, pending: [JobDelivery<Output>], knownProgress: Double) -> Bool {
    entries[id] = Entry(handler: handler, pending: pending, knownProgress: knownProgress)
    return startDraining()
  }

  /// Removes an observer; its handler and pending deliveries are released with the returned entry.
  mutating func remove(_ id: UInt64) -> Entry? {
    entries.removeValue(forKey: id)
  }

  /// Takes every observer's pending deliveries, dropping observers that got their end. Returns
  /// `nil`, and stops draining, when there is nothing left to deliver.
  mutating func takeDeliveries() -> [(Handler, [JobDelivery<Output>])]? {
    var batch: [(Handler, [JobDelivery<Output>])] = []
    var ended: [UInt64] = []
    for (id, entry) in entries where !entry.pending.isEmpty {
      batch.append((entry.handler, entry.pending))
      if case .end = entry.pending.last { ended.append(id) }
    }
    guard !batch.isEmpty else {
      isDraining = false
      return nil
    }
    for index in entries.indices { entries.values[index].pending.removeAll() }
    for id in ended { entries.removeValue(forKey: id) }
    return batch
  }

  /// Removes every observer, for the job's `deinit`; they are released with the returned array.
  mutating func detachAll() -> [Entry] {
    defer { entries.removeAll() }
    return Array(entries.values)
  }

  /// Makes the caller the drainer unless someone already drains.
  private mutating func startDraining() -> Bool {
    guard !isDraining else { return false }
    isDraining = true
    return true
  }
}
