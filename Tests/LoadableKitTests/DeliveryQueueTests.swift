@testable import LoadableKit
import LoadableKitTesting
import Testing

/// The one serial delivery queue (`Support/DeliveryQueue.swift`), tested synchronously as a
/// value: who becomes the drainer, the order of the items, and when the drainer role ends.
@Suite("Delivery queue", .timeLimit(.minutes(1)))
struct DeliveryQueueTests {
  /// The queue in a box, so that `#expect` can call its mutating methods.
  final class Queue {
    var queue = DeliveryQueue<Int>()
    var isDraining: Bool { queue.isDraining }
    var isEmpty: Bool { queue.isEmpty }
    func append(_ item: Int) -> Bool { queue.append(item) }
    func append(contentsOf items: some Sequence<Int>) -> Bool { queue.append(contentsOf: items) }
    func takeBatch() -> [Int]? { queue.takeBatch() }
    func removeAll(where shouldBeRemoved: (Int) -> Bool) -> [Int] { queue.removeAll(where: shouldBeRemoved) }
  }

  @Test func theFirstAppendToAnIdleQueueClaimsTheDrainerRole() {
    let queue = Queue()
    #expect(!queue.isDraining && queue.isEmpty)
    #expect(queue.append(1), "the first append makes its caller the drainer")
    #expect(queue.isDraining)
    #expect(!queue.append(2), "a drainer is at work")
    #expect(!queue.append(contentsOf: [3, 4]))
    #expect(queue.takeBatch() == [1, 2, 3, 4])
    #expect(queue.isDraining, "a take that finds items keeps the role")
    #expect(!queue.append(5), "appended while the drainer delivers: it takes it next")
    #expect(queue.takeBatch() == [5])
    #expect(queue.takeBatch() == nil, "an empty take ends the role")
    #expect(!queue.isDraining && queue.isEmpty)
    #expect(queue.append(6), "an append after the role ended claims it again")
    #expect(queue.takeBatch() == [6])
    #expect(queue.takeBatch() == nil)
  }

  @Test func appendingNothingClaimsNothing() {
    let queue = Queue()
    #expect(!queue.append(contentsOf: []))
    #expect(!queue.isDraining)
    #expect(queue.append(contentsOf: [1, 2]))
    #expect(queue.takeBatch() == [1, 2])
    #expect(queue.takeBatch() == nil)
  }

  @Test func removingItemsKeepsTheOthersOrderAndTheRole() {
    let queue = Queue()
    #expect(queue.append(contentsOf: 1...6))
    #expect(queue.removeAll { $0 % 2 == 0 } == [2, 4, 6])
    #expect(queue.removeAll { $0 > 10 } == [])
    #expect(queue.isDraining)
    #expect(queue.takeBatch() == [1, 3, 5])
    #expect(!queue.append(7))
    #expect(queue.removeAll { _ in true } == [7])
    #expect(queue.isDraining, "the drainer's next take ends the role")
    #expect(queue.takeBatch() == nil)
    #expect(!queue.isDraining)
  }

  /// Seeded random appends (one, several, none), removals and takes against a model — an array
  /// and a Bool: the queue hands out the same items in the same order, and the drainer role is
  /// claimed exactly by an append that finds it free and ended exactly by a take that finds
  /// nothing.
  @Test(arguments: 0..<10)
  func randomOperationsMatchAModel(seed: UInt64) {
    var random = SplitMix64(seed: seed)
    let queue = Queue()
    var pending: [Int] = []
    var draining = false
    var next = 0
    for step in 0..<2_000 {
      var claimed = false
      var expectedClaim = false
      switch random.next() % 10 {
      case 0..<3:
        claimed = queue.append(next)
        pending.append(next)
        next += 1
        expectedClaim = !draining
      case 3..<5:
        let items = Array(next..<next + Int(random.next() % 4))
        claimed = queue.append(contentsOf: items)
        pending += items
        next += items.count
        expectedClaim = !draining && !items.isEmpty
      case 5:
        let divisor = Int(random.next() % 3) + 2
        #expect(queue.removeAll { $0 % divisor == 0 } == pending.filter { $0 % divisor == 0 })
        pending.removeAll { $0 % divisor == 0 }
      default:
        guard draining else { continue }  // only the drainer takes
        let batch = queue.takeBatch()
        #expect(batch == (pending.isEmpty ? nil : pending), "seed \(seed), step \(step)")
        if pending.isEmpty { draining = false }
        pending.removeAll()
      }
      if expectedClaim { draining = true }
      guard claimed == expectedClaim, queue.isDraining == draining, queue.isEmpty == pending.isEmpty else {
        Issue.record("seed \(seed), step \(step): claimed \(claimed), draining \(queue.isDraining), expected \(expectedClaim), \(draining)")
        break
      }
    }
  }
}
