@testable import LoadableKit
import Testing

/// The load limit's queue as a value (`LoadLimiter.State`), synchronously: which place a task that
/// found every slot taken may borrow. The moment is reachable through a `ContentLoader` only
/// between a claim reserving a place, under the loader's lock, and the load's task coming for it;
/// `ContentLoaderListsExplorationTests` reaches it by schedule, these tests by construction.
@Suite("Load limit: lending a granted slot", .timeLimit(.minutes(1)))
struct LoadLimiterStateTests {
  /// The places' tickets (a key's entry's in the loader).
  private let keys: [LoadLimiter.Ticket] = [11, 12]

  private func place(_ index: Int, _ priority: ClaimPriority, order: UInt64) -> LoadLimiter.Waiter {
    LoadLimiter.Waiter(
      ticket: keys[index], attempt: UInt64(index + 1), priority: priority, order: order, continuation: nil)
  }

  /// Both slots are granted to places whose tasks have not come, at priorities `first` and
  /// `second` (the second place the newer).
  private func twoGranted(_ first: ClaimPriority, _ second: ClaimPriority) -> LoadLimiter.State {
    var state = LoadLimiter.State(limit: 2)
    state.granted = [place(0, first, order: 1), place(1, second, order: 2)]
    state.taken = 2
    return state
  }

  private func waitingTickets(_ state: LoadLimiter.State) -> [LoadLimiter.Ticket] {
    state.waiting.map(\.element.ticket)
  }

  /// Of a visible key's place and a prefetched one's, the prefetched one is lent; of two as
  /// urgent, the newest. Either way the other keeps its slot.
  @Test(arguments: [(ClaimPriority.visible, ClaimPriority.prefetch), (.visible, .visible)])
  func aTaskBorrowsTheLeastUrgentGrantedPlaceTheNewestAmongEquals(first: ClaimPriority, second: ClaimPriority) {
    var state = twoGranted(first, second)
    let lent = state.lendGrantedSlot(to: .visible)
    #expect(lent)
    // The second place goes back to the queue; the first keeps its slot.
    #expect(state.granted.map(\.ticket) == [keys[0]])
    #expect(waitingTickets(state) == [keys[1]])
  }

  @Test func aPlaceMoreUrgentThanTheTaskIsNotLent() {
    var state = twoGranted(.visible, .visible)
    let lent = state.lendGrantedSlot(to: .prefetch)
    #expect(!lent)
    #expect(state.granted.count == 2)
    #expect(state.waiting.isEmpty)
    // Of a visible and a background place, a prefetching task may borrow only the background one.
    var mixed = twoGranted(.visible, .background)
    let lentBackground = mixed.lendGrantedSlot(to: .prefetch)
    #expect(lentBackground)
    #expect(mixed.granted.map(\.ticket) == [keys[0]])
  }
}
