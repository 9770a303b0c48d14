/// The one serial delivery queue: the notifications a host queues under its lock, in the order of
/// its changes, and who delivers them — an `AsyncLoadable`'s status observers
/// (``ObserverRegistry``), a job's observers (``JobObservers``), and a `ContentLoader`'s claims'
/// observers and event streams (`ContentLoaderState.outbox`).
///
/// It holds the pending items and the drainer role. Whoever appends to an idle queue becomes the
/// drainer (``append(_:)`` returns `true`) and, after the lock, drains it: it takes a batch under
/// the lock (``takeBatch()``), runs it after the lock, and repeats until a take finds the queue
/// empty, which ends its role in the same step, so an item appended later finds the queue idle
/// and its caller drains. So items are delivered one at a time and in order, and a handler that
/// changes the host, called by the drainer, only appends more work for the same loop (its own
/// append returns `false`) instead of running it inside the handler.
///
/// Handlers never run under the host's lock: they are user code, which may take the lock again
/// (a deadlock) or run for long. Items are released outside it too — the drainer drops the
/// batches it took after the lock, and an item that leaves otherwise (``removeAll(where:)``, or
/// the whole queue taken out with its host's observers) is returned for its caller to release
/// after the lock — since an item may hold the last reference to user values, whose `deinit` is
/// user code.
///
/// A queue that is delivered one item at a time costs no allocation per append: a take leaves
/// the queue's capacity in place for the next changes.
struct DeliveryQueue<Item> {
  private var items: [Item] = []
  /// A caller is draining: it will take what is appended before its take finds the queue empty.
  private(set) var isDraining = false

  var isEmpty: Bool { items.isEmpty }
  /// How many items are queued (the size tests check).
  var count: Int { items.count }

  /// Queues `item`. Returns `true` when the caller became the drainer and must drain after the
  /// lock.
  mutating func append(_ item: Item) -> Bool {
    items.append(item)
    return claim()
  }

  /// Queues `newItems` in order. Returns `true` when the caller became the drainer and must drain
  /// after the lock; `false`, claiming nothing, when `newItems` is empty.
  mutating func append(contentsOf newItems: some Sequence<Item>) -> Bool {
    let count = items.count
    items.append(contentsOf: newItems)
    return items.count > count && claim()
  }

  /// For the drainer: takes every queued item, in order, or — when there is none — ends the
  /// drainer role and returns `nil`, in one step under the host's lock.
  mutating func takeBatch() -> [Item]? {
    if items.isEmpty {
      isDraining = false
      return nil
    }
    defer { items.removeAll(keepingCapacity: true) }
    return items
  }

  /// Takes out the queued items `shouldBeRemoved` picks (a recipient that left), keeping the
  /// others' order; they are returned to be released after the lock. The drainer role is left as
  /// it is: the drainer's next take ends it if nothing is left.
  mutating func removeAll(where shouldBeRemoved: (Item) -> Bool) -> [Item] {
    guard items.contains(where: shouldBeRemoved) else { return [] }
    let removed = items.filter(shouldBeRemoved)
    items.removeAll(where: shouldBeRemoved)
    return removed
  }

  private mutating func claim() -> Bool {
    if isDraining { return false }
    isDraining = true
    return true
  }
}

extension DeliveryQueue: Sendable where Item: Sendable {}
