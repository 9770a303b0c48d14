/// The status observers of one loadable and the queue that serializes their notifications.
///
/// Changes are queued under the lock in the order they happen, in a ``DeliveryQueue``: whoever
/// queues into an idle queue becomes the deliverer and drains it outside the lock, so handlers run
/// one at a time, in order, and a handler that changes the loadable only queues more work for the
/// same loop. A notification names its recipients, resolved to handlers when it is taken.
struct ObserverRegistry {
  typealias Handler = @Sendable (LoadStatus) -> Void

  struct Entry {
    var handler: Handler
    var onEnd: (@Sendable () -> Void)?
  }

  enum Recipients {
    case all(below: UInt64)
    case one(UInt64)
  }

  var entries: [UInt64: Entry] = [:]
  var queue = DeliveryQueue<(status: LoadStatus, to: Recipients)>()

  /// Queues a change for every current observer; returns `true` when the caller must drain.
  mutating func enqueueChange(_ status: LoadStatus) -> Bool {
    guard !entries.isEmpty else { return false }
    // Identifiers increase (Support/UniqueID.swift): every observer added so far, under this
    // lock, has a smaller one than this fresh identifier, every one added later a larger one.
    return queue.append((status, .all(below: nextUniqueID())))
  }

  /// Adds an observer and queues the current status for it alone.
  mutating func add(_ entry: Entry, current: LoadStatus) -> (id: UInt64, drain: Bool) {
    let id = nextUniqueID()
    entries[id] = entry
    return (id, queue.append((current, .one(id))))
  }

  /// Takes the queued notifications, resolved to handlers, or ends delivery when there are none.
  mutating func takeBatch() -> [(UInt64, Handler, LoadStatus)]? {
    guard let pending = queue.takeBatch() else { return nil }
    var batch: [(UInt64, Handler, LoadStatus)] = []
    for (status, recipients) in pending {
      switch recipients {
      case .one(let id):
        if let entry = entries[id] { batch.append((id, entry.handler, status)) }
      case .all(let limit):
        for (id, entry) in entries.sorted(by: { $0.key < $1.key }) where id < limit {
          batch.append((id, entry.handler, status))
        }
      }
    }
    return batch
  }
}
