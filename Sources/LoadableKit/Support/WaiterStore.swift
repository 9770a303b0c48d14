/// The one store of waiters: every continuation the library suspends a task on, and every
/// callback that stands in for one, waits in a `WaiterStore` until it is taken out to be resumed —
/// an attempt's waiters (``RunningAttempt``), the tasks queued at a loadable's gate
/// (``LoadableExtras``), a job's parked callers, idle waits and settle waiters
/// (``JobStateMachine``), the loads waiting for a slot of a `ContentLoader`'s limit
/// (``LoadLimiter``), and the callers of `JobManager.remove(id:)` waiting for a record's deletion.
///
/// Entries are keyed by a `UInt64` id (unique among the entries in the store) and kept in
/// registration order. An entry leaves exactly once — by its id (``remove(_:)``), as the first
/// (``popFirst()``), or with all the others (``takeAll()``) — and whoever takes it out resumes it;
/// an id that is not in the store (never added, or already taken) gives `nil`. The store itself
/// has no order of its own beyond registration: the limiter ranks its places by priority over
/// ``makeIterator()`` and takes the one it chose by id.
///
/// Most stores hold one entry (the caller that started an attempt, a `map`'s dependent group), so
/// the first is stored inline, without an allocation; the others in an array, where an entry
/// taken out by id leaves a `nil` (O(1), however many others wait). Past ``scanLimit`` slots a
/// dictionary finds an id's slot; below it a scan of the few slots does. Once most slots are
/// empty the array is compacted, keeping the order, and a store that empties starts over inline:
/// a long run of waiters that come and go costs memory for those still waiting only (amortized
/// O(1) an entry).
///
/// Held under its owner's lock, like the rest of the owner's state; it resumes nothing itself.
///
/// In debug builds each entry carries a check, shared by copies of the store: taking the same
/// entry out twice (through two copies of one store, which would resume its continuation twice)
/// or dropping an entry that holds a continuation without taking it out (a store destroyed or
/// overwritten with a task still waiting in it, which would wait forever) stops the process with
/// an assertion. Release builds store the entries alone.
struct WaiterStore<Element>: Sequence {
  /// One entry's place.
  struct Slot {
    let id: UInt64
    var element: Element
    #if DEBUG
    let check: WaiterCheck
    #endif

    init(id: UInt64, element: Element) {
      self.id = id
      self.element = element
      #if DEBUG
      check = WaiterCheck(id: id, armed: WaiterCheck.holdsContinuation(element))
      #endif
    }

    /// The entry leaves its store (debug builds: checks it leaves once).
    @inline(__always) func take() -> (id: UInt64, element: Element) {
      #if DEBUG
      check.take()
      #endif
      return (id, element)
    }
  }

  /// The first entry, when it is not in `rest`: it precedes every entry there.
  private var inline: Slot?
  private var rest: [Slot?] = []
  /// Every slot of `rest` before it is empty (where ``popFirst()`` looks first).
  private var head = 0
  /// The slot in `rest` of each entry there, once `rest` holds more than ``scanLimit`` slots.
  private var index = [UInt64: Int]()
  /// How many entries wait.
  private(set) var count = 0

  /// Up to this many slots in `rest`, an id is found by a scan and no dictionary is built.
  static var scanLimit: Int { 8 }

  init() {}

  var isEmpty: Bool { count == 0 }

  /// How many slots are stored, those of entries taken out by id included (for tests: an entry
  /// that leaves must not leave its slot behind for long).
  var storedCount: Int { rest.count + (inline == nil ? 0 : 1) }

  /// The entry that has waited longest, if any (it stays in the store).
  var first: (id: UInt64, element: Element)? {
    if let inline { return (inline.id, inline.element) }
    for case let slot? in rest[head...] { return (slot.id, slot.element) }
    return nil
  }

  /// Calls `body` with each entry still waiting, in registration order; they stay in the store.
  ///
  /// What resuming an ended attempt's waiters uses: the entries are read where they are, not
  /// through an ``Iterator``, which holds copies of the first slot and of the rest and is
  /// destroyed through its type's value witnesses (a `map` node's load: 10,643 instructions
  /// through the iterator, 10,209 without it).
  func forEachEntry(_ body: (Element) throws -> Void) rethrows {
    if inline != nil { try body(inline.unsafelyUnwrapped.element) }
    guard !rest.isEmpty else { return }
    for position in head..<rest.count where rest[position] != nil {
      try body(rest[position].unsafelyUnwrapped.element)
    }
  }

  /// Adds `element` under `id`, after the others. `id` must not be in the store.
  mutating func append(_ element: consuming Element, id: UInt64) {
    count += 1
    if inline == nil && rest.isEmpty {
      inline = Slot(id: id, element: element)
      return
    }
    if rest.count >= Self.scanLimit {
      if rest.count == Self.scanLimit { indexSlots() }
      index[id] = rest.count
    }
    rest.append(Slot(id: id, element: element))
  }

  /// Takes out the entry with `id`; `nil` when there is none (never added, or taken already).
  mutating func remove(_ id: UInt64) -> Element? {
    if let slot = inline, slot.id == id {
      inline = nil
      count -= 1
      if count == 0 && !rest.isEmpty { reset() }
      return slot.take().element
    }
    guard let position = position(of: id, removing: true), let slot = rest[position] else { return nil }
    rest[position] = nil
    count -= 1
    compactIfSparse()
    return slot.take().element
  }

  /// Takes out the entry that has waited longest, if any.
  mutating func popFirst() -> (id: UInt64, element: Element)? {
    if let slot = inline {
      inline = nil
      count -= 1
      if count == 0 && !rest.isEmpty { reset() }
      return slot.take()
    }
    while head < rest.count {
      let position = head
      head += 1
      guard let slot = rest[position] else { continue }
      rest[position] = nil
      if rest.count > Self.scanLimit { index[slot.id] = nil }
      count -= 1
      compactIfSparse()
      return slot.take()
    }
    return nil
  }

  /// Takes out every entry, in registration order, leaving the store empty: the entries are
  /// moved out, not copied (no retain of each).
  mutating func takeAll() -> WaiterStore {
    #if DEBUG
    for entry in SlotSequence(store: self) { _ = entry.take() }
    #endif
    defer { self = WaiterStore() }
    return self
  }

  /// Changes the entry with `id` in place; `nil` when there is none.
  @discardableResult
  mutating func update<Result>(_ id: UInt64, _ body: (inout Element) -> Result) -> Result? {
    if inline?.id == id {
      defer { Self.rearm(&inline!) }
      return body(&inline!.element)
    }
    guard let position = position(of: id, removing: false), rest[position] != nil else { return nil }
    defer { Self.rearm(&rest[position]!) }
    return body(&rest[position]!.element)
  }

  /// Changes every entry in place, in registration order.
  mutating func updateEach(_ body: (inout Element) -> Void) {
    if inline != nil {
      body(&inline!.element)
      Self.rearm(&inline!)
    }
    for position in rest.indices[head...] where rest[position] != nil {
      body(&rest[position]!.element)
      Self.rearm(&rest[position]!)
    }
  }

  struct Iterator: IteratorProtocol {
    var slots: SlotSequence.Iterator
    mutating func next() -> (id: UInt64, element: Element)? {
      slots.next().map { ($0.id, $0.element) }
    }
  }

  /// The entries still waiting, in registration order; they stay in the store.
  func makeIterator() -> Iterator { Iterator(slots: SlotSequence(store: self).makeIterator()) }

  /// The occupied slots, in order.
  struct SlotSequence: Sequence {
    let store: WaiterStore

    struct Iterator: IteratorProtocol {
      var first: Slot?
      var rest: ArraySlice<Slot?>.Iterator

      mutating func next() -> Slot? {
        if let first {
          self.first = nil
          return first
        }
        while let slot = rest.next() {
          if let slot { return slot }
        }
        return nil
      }
    }

    func makeIterator() -> Iterator {
      Iterator(first: store.inline, rest: store.rest[store.head...].makeIterator())
    }
  }

  // MARK: - Slots

  /// Where `id` sits in `rest`: through the index past ``scanLimit`` slots (dropping it there when
  /// `removing`), by a scan below it.
  private mutating func position(of id: UInt64, removing: Bool) -> Int? {
    if rest.count > Self.scanLimit { return removing ? index.removeValue(forKey: id) : index[id] }
    return rest[head...].firstIndex { $0?.id == id }
  }

  /// Indexes the slots of the entries in `rest` (it is growing past ``scanLimit``).
  private mutating func indexSlots() {
    for (position, slot) in rest.enumerated() {
      if let slot { index[slot.id] = position }
    }
  }

  /// Drops the empty slots of `rest` once most are empty, keeping the order of the others.
  private mutating func compactIfSparse() {
    if count == 0 { return reset() }
    let inRest = count - (inline == nil ? 0 : 1)
    guard rest.count >= 32 && inRest * 4 < rest.count else { return }
    var kept: [Slot?] = []
    kept.reserveCapacity(inRest * 2)
    for case let slot? in rest[head...] { kept.append(slot) }
    rest = kept
    head = 0
    index = [UInt64: Int]()
    if rest.count > Self.scanLimit { indexSlots() }
  }

  /// Empties `rest`, which holds no entry any more: the next entry is stored inline again.
  private mutating func reset() {
    rest = []
    head = 0
    index = [UInt64: Int]()
  }

  @inline(__always) private static func rearm(_ slot: inout Slot) {
    #if DEBUG
    slot.check.armed = WaiterCheck.holdsContinuation(slot.element)
    #endif
  }
}

extension WaiterStore: Sendable where Element: Sendable {}
extension WaiterStore.Slot: Sendable where Element: Sendable {}

/// An entry of a ``WaiterStore`` that holds a continuation only some of the time (a limiter's
/// place reserved before its task came for it): the debug check lets it go untaken while it
/// holds none. Other entries always hold one (or a callback that stands in for one).
protocol WaiterStoreEntry {
  var holdsContinuation: Bool { get }
}

#if DEBUG
/// The debug check of one entry of a ``WaiterStore``: it must leave its store once, and — while
/// it holds a continuation — must not be dropped before it left. Touched under the store's
/// owner's lock; its `deinit` runs where the last copy of the entry goes, after that lock.
final class WaiterCheck: @unchecked Sendable {
  let id: UInt64
  var armed: Bool
  private var taken = false

  init(id: UInt64, armed: Bool) {
    self.id = id
    self.armed = armed
  }

  static func holdsContinuation(_ element: some Any) -> Bool {
    (element as? any WaiterStoreEntry)?.holdsContinuation ?? true
  }

  func take() {
    assert(!taken, "waiter \(id) was taken out of its store twice: its continuation would be resumed twice")
    taken = true
  }

  deinit {
    assert(taken || !armed, "waiter \(id) was dropped without being taken out of its store: it would wait forever")
  }
}
#endif
