@testable import LoadableKit
import LoadableKitTesting
import Testing

/// The one store of waiters (`Support/WaiterStore.swift`), tested synchronously as a value: the
/// order it keeps, that an entry leaves once, and that the slots of entries that left are freed.
@Suite("Waiter store", .timeLimit(.minutes(1)))
struct WaiterStoreTests {
  typealias Store = WaiterStore<String>

  static func store(_ ids: some Sequence<UInt64>) -> Store {
    var store = Store()
    for id in ids { store.append("w\(id)", id: id) }
    return store
  }

  static func ids(_ store: Store) -> [UInt64] { store.map(\.id) }

  @Test func entriesKeepTheirRegistrationOrder() {
    for count in [1, 2, 8, 9, 10, 40] {
      var store = Self.store(1...UInt64(count))
      #expect(Self.ids(store) == Array(1...UInt64(count)))
      #expect(store.count == count)
      #expect(store.first?.id == 1)
      // The first leaves; those after it, and one that comes later, keep their order.
      #expect(store.remove(1) == "w1")
      store.append("late", id: 100)
      #expect(Self.ids(store) == Array(2..<UInt64(count + 1)) + [100])
      var popped: [UInt64] = []
      while let entry = store.popFirst() { popped.append(entry.id) }
      #expect(popped == Array(2..<UInt64(count + 1)) + [100])
      #expect(store.isEmpty && store.storedCount == 0)
    }
  }

  @Test func anEntryLeavesExactlyOnce() {
    for count in [1, 3, 9, 50] {
      var store = Self.store(1...UInt64(count))
      #expect(store.remove(999) == nil, "an id never added")
      for id in stride(from: UInt64(count), through: 1, by: -2) {
        #expect(store.remove(id) == "w\(id)")
        #expect(store.remove(id) == nil, "an id taken already")
      }
      let remaining = Self.ids(store)
      var popped: [UInt64] = []
      while let entry = store.popFirst() {
        popped.append(entry.id)
        #expect(store.remove(entry.id) == nil, "an id popped already")
      }
      #expect(popped == remaining)
      #expect(store.popFirst() == nil && store.count == 0)
      // Taken out all at once: none can be taken again.
      store = Self.store(1...UInt64(count))
      let taken = store.takeAll()
      #expect(Self.ids(taken) == Array(1...UInt64(count)))
      for id in 1...UInt64(count) { #expect(store.remove(id) == nil) }
      #expect(store.popFirst() == nil)
    }
  }

  @Test func takeAllMovesEveryEntryOutAndTheStoreStartsOverInline() {
    var store = Self.store(1...20)
    _ = store.remove(5)
    _ = store.popFirst()
    let taken = store.takeAll()
    #expect(taken.map(\.element) == (2...20).filter { $0 != 5 }.map { "w\($0)" })
    #expect(store.isEmpty && store.count == 0 && store.storedCount == 0 && store.first == nil)
    store.append("next", id: 21)
    #expect(store.storedCount == 1, "one entry is stored inline")
    #expect(Self.ids(store) == [21])
    _ = store.takeAll()  // entries are taken out before a store goes (checked in debug builds)
  }

  /// Entries that leave free their slots: a long run of waiters that come and go keeps memory for
  /// those still waiting, and the store keeps their order (and finds them by id) after compacting.
  @Test func compactionKeepsTheOrderOfThoseStillWaiting() {
    var store = Self.store(1...200)
    for id in UInt64(1)...200 where id % 10 != 0 { #expect(store.remove(id) == "w\(id)") }
    #expect(store.count == 20)
    #expect(store.storedCount < 100, "the slots of entries that left are freed")
    #expect(Self.ids(store) == Array(stride(from: UInt64(10), through: 200, by: 10)))
    store.append("late", id: 500)
    #expect(store.remove(150) == "w150", "found by id after compacting")
    #expect(store.remove(150) == nil)
    #expect(Self.ids(store) == Array(stride(from: UInt64(10), through: 200, by: 10)).filter { $0 != 150 } + [500])
    // Entries that leave from the front, one at a time, free their slots too.
    var queue = Self.store(1...1_000)
    for id in UInt64(1)...990 { #expect(queue.popFirst()?.id == id) }
    #expect(queue.storedCount < 100)
    #expect(Self.ids(queue) == Array(991...1_000))
    _ = (store.takeAll(), queue.takeAll())
  }

  @Test func updateChangesAnEntryInPlace() {
    var store = Self.store(1...12)
    #expect(store.update(1) { $0 += "!" } != nil)
    #expect(store.update(11) { $0 += "?" } != nil)
    #expect(store.update(99) { $0 += "?" } == nil)
    store.updateEach { $0 = $0.uppercased() }
    #expect(store.remove(1) == "W1!")
    #expect(store.remove(11) == "W11?")
    #expect(store.first?.element == "W2")
    _ = store.takeAll()
  }

  /// Seeded random appends, removals by id (known and unknown), pops and take-alls against a plain
  /// array: the store holds the same entries in the same order after every step, and hands each
  /// out once.
  @Test(arguments: 0..<10)
  func randomOperationsMatchAnArray(seed: UInt64) {
    var random = SplitMix64(seed: seed)
    var store = Store()
    var model: [UInt64] = []
    var nextID: UInt64 = 1
    var handedOut = Set<UInt64>()
    for step in 0..<1_500 {
      switch random.next() % 10 {
      case 0..<4:
        // Bursts past the scan limit and the compaction threshold, a few hundred at most.
        let burst = model.count < 5 ? Int(random.next() % 40) : model.count < 300 ? 1 : 0
        for _ in 0..<burst + (model.isEmpty ? 1 : 0) {
          store.append("w\(nextID)", id: nextID)
          model.append(nextID)
          nextID += 1
        }
      case 4..<7:
        let id = model.isEmpty || random.next() % 5 == 0 ? random.next() % (nextID + 1) : model[Int(random.next() % UInt64(model.count))]
        let removed = store.remove(id)
        if let index = model.firstIndex(of: id) {
          model.remove(at: index)
          #expect(removed == "w\(id)")
          #expect(handedOut.insert(id).inserted)
        } else {
          #expect(removed == nil)
        }
      case 7..<9:
        let popped = store.popFirst()
        #expect(popped?.id == model.first)
        if let popped {
          model.removeFirst()
          #expect(handedOut.insert(popped.id).inserted)
        }
      default:
        if random.next() % 4 == 0 {
          for (id, _) in store.takeAll() { #expect(handedOut.insert(id).inserted) }
          model.removeAll()
        }
      }
      guard Self.ids(store) == model, store.count == model.count, store.storedCount <= 4 * model.count + 64 else {
        Issue.record("seed \(seed), step \(step): \(Self.ids(store)) (\(store.storedCount) slots), expected \(model)")
        break
      }
    }
    _ = store.takeAll()
  }

  #if DEBUG
  /// The debug check: an entry taken out twice, through two copies of one store, and an entry
  /// dropped while it holds a continuation, stop the process; an entry that holds none (a
  /// limiter's reserved place) may be dropped.
  @Test func debugBuildsCatchADoubleTakeAndADroppedWaiter() async {
    await #expect(processExitsWith: .failure) {
      var store = WaiterStore<String>()
      store.append("w", id: 1)
      var copy = store
      _ = store.remove(1)
      _ = copy.remove(1)
    }
    await #expect(processExitsWith: .failure) {
      var store = WaiterStore<String>()
      store.append("w", id: 1)
      store.append("x", id: 2)
      _ = store.takeAll()
      _ = store.popFirst()
      store = WaiterStore()  // drops nothing: both were taken
      store.append("y", id: 3)
      store = WaiterStore()  // drops 3, which nobody took out
    }
    await #expect(processExitsWith: .success) {
      struct Reservation: WaiterStoreEntry {
        var holdsContinuation: Bool
      }
      var store = WaiterStore<Reservation>()
      store.append(Reservation(holdsContinuation: true), id: 1)
      store.update(1) { $0.holdsContinuation = false }
      store = WaiterStore()
      _ = store
    }
  }
  #endif
}
