import Synchronization

/// At most `limit` keyed loads at once; the others wait in priority order (first come, first
/// served within a priority). A waiting load whose task is cancelled — its claims ended — leaves
/// the queue and never starts.
///
/// Each key's loadable runs one attempt at a time, so a key is in the queue at most once and its
/// entry identifies its place.
final class LoadLimiter: Sendable {
  typealias Ticket = ObjectIdentifier

  struct Waiter {
    let ticket: Ticket
    var priority: ClaimPriority
    let order: UInt64
    let continuation: UnsafeContinuation<Void, any Error>
  }

  struct State {
    let limit: Int
    var running = 0
    var waiting: [Waiter] = []
    var order: UInt64 = 0
    /// The most loads that ran at once (for tests).
    var peak = 0
  }

  let state: Mutex<State>

  init(limit: Int) {
    state = Mutex(State(limit: max(limit, 1)))
  }

  var peak: Int { state.withLock(owner: self) { $0.peak } }

  /// How many loads wait for a slot (for tests).
  var waitingCount: Int { state.withLock(owner: self) { $0.waiting.count } }

  /// Waits for a slot. Throws `CancellationError`, without taking a slot, when the task is
  /// cancelled first — also when the cancellation comes after the slot was granted but before
  /// the task resumed, so a load whose claims ended meanwhile never calls the data source.
  func acquire(_ ticket: Ticket, priority: ClaimPriority) async throws {
    try await waitForSlot(ticket, priority: priority)
    if Task.isCancelled {
      release()
      throw CancellationError()
    }
  }

  private func waitForSlot(_ ticket: Ticket, priority: ClaimPriority) async throws {
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        let start = state.withLock(owner: self) { state -> Bool? in
          if Task.isCancelled { return false }
          if state.running < state.limit {
            state.running += 1
            state.peak = max(state.peak, state.running)
            return true
          }
          state.order += 1
          state.waiting.append(Waiter(ticket: ticket, priority: priority, order: state.order, continuation: continuation))
          return nil
        }
        switch start {
        case true?: continuation.resume()
        case false?: continuation.resume(throwing: CancellationError())
        case nil: break
        }
      }
    } onCancel: {
      let removed = state.withLock(owner: self) { state -> Waiter? in
        guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else { return nil }
        return state.waiting.remove(at: index)
      }
      removed?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Gives the slot to the most urgent waiter, if any.
  func release() {
    let next = state.withLock(owner: self) { state -> Waiter? in
      guard let index = state.waiting.indices.max(by: { Self.isBefore(state.waiting[$1], state.waiting[$0]) }) else {
        state.running -= 1
        return nil
      }
      return state.waiting.remove(at: index)
    }
    next?.continuation.resume()
  }

  /// The key's claims changed priority: its waiting load moves in the queue.
  func reprioritize(_ ticket: Ticket, to priority: ClaimPriority) {
    state.withLock(owner: self) { state in
      if let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) { state.waiting[index].priority = priority }
    }
  }

  /// Whether `a` goes before `b`: higher priority first, then first come.
  static func isBefore(_ a: Waiter, _ b: Waiter) -> Bool {
    a.priority != b.priority ? a.priority > b.priority : a.order < b.order
  }
}
