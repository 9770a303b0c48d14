import Synchronization

/// At most `limit` keyed loads at once; the others wait in priority order (first come, first
/// served within a priority). A waiting load whose task is cancelled — its claims ended — leaves
/// the queue and never starts.
///
/// A load takes its place in the queue when its claim starts it, under the loader's lock
/// (``reserve(_:attempt:priority:)``), not when its task first runs: a slot that frees in between
/// goes to the most urgent load claimed, even one whose task has not reached the queue yet — it
/// is then kept for that load (*granted*) until its task comes for it (``acquire(_:attempt:priority:)``).
/// A load started another way (a caller of the key's loadable) takes its place when its task
/// comes. A place reserved for an attempt that ends without coming for it is given back when the
/// loader sees the attempt end (``cancelReservation(_:attempt:)``).
///
/// A key's place is identified by its ticket and the attempt: an entry's ticket is its own, or,
/// for an entry made for a key whose evicted entry's abandoned work still holds the key's slot,
/// that entry's (``ContentLoaderState/evictedSlots``). The limit counts keys:
/// a key's loads share one slot (``State/holders``). A key may have two loads running — a fresh
/// one beside the one it superseded, or beside a cancelled one whose work has not returned
/// (SPEC §5) — and the fresh one runs at once on the slot the key holds, without waiting behind
/// the stale work; the slot goes on when the last of them returns. So at most `limit` keys call
/// the data source at once, and a key never waits for its own stale load.
final class LoadLimiter: Sendable {
  typealias Ticket = UInt64
  typealias Continuation = UnsafeContinuation<Void, any Error>

  struct Waiter: WaiterStoreEntry {
    let ticket: Ticket
    /// The attempt the place is for; `nil` when its task could not tell.
    let attempt: UInt64?
    var priority: ClaimPriority
    let order: UInt64
    /// The task waiting for the slot; `nil` while the place is only reserved.
    var continuation: Continuation?

    func isFor(_ ticket: Ticket, attempt: UInt64?) -> Bool {
      self.ticket == ticket && (attempt == nil || self.attempt == nil || self.attempt == attempt)
    }

    var holdsContinuation: Bool { continuation != nil }
  }

  struct State {
    let limit: Int
    /// Slots taken: by loads running and by places granted whose tasks have not come yet.
    var taken = 0
    /// The places waiting for a slot, by their `order`, in the order they joined the queue (the
    /// most urgent is found by ``LoadLimiter/isBefore(_:_:)``, not by position).
    var waiting = WaiterStore<Waiter>()
    /// Reserved places that were given a slot before their tasks came for it.
    var granted: [Waiter] = []
    var order: UInt64 = 0
    /// The keys whose loads hold a slot, and how many of their loads run on it (more than one
    /// while a superseded or cancelled load's work has not returned).
    var holders: [Ticket: Int] = [:]
    /// The most slots taken at once (for tests).
    var peak = 0

    /// A load of `ticket`'s key starts on a slot: the one it was given, or the key's own.
    mutating func hold(_ ticket: Ticket) {
      holders[ticket, default: 0] += 1
    }

    /// A load of `ticket`'s key returned; the last one gives the key's slot back.
    mutating func leave(_ ticket: Ticket) -> Continuation? {
      guard let count = holders[ticket] else { return nil }
      if count > 1 {
        holders[ticket] = count - 1
        return nil
      }
      holders[ticket] = nil
      return handOver()
    }

    mutating func take() {
      taken += 1
      peak = max(peak, taken)
    }

    /// A slot was given back: it goes to the most urgent waiter — resumed by the caller, after the
    /// lock, or kept for it when its task has not come yet.
    ///
    /// A slot kept so is lent at once to the most urgent task already waiting, under the rule a
    /// task coming now would meet (``lendGrantedSlot(to:)``): the place it was kept for may be
    /// waiting for that very load. A claimed key whose load first loads another key of the loader
    /// (a declared dependency) was granted the slot while the dependency's task already waited in
    /// the queue, and the two waited for each other for good.
    mutating func handOver() -> Continuation? {
      guard let chosen = waiting.min(by: { LoadLimiter.isBefore($0.element, $1.element) }) else {
        taken -= 1
        return nil
      }
      let next = waiting.remove(chosen.id)!
      if let continuation = next.continuation {
        hold(next.ticket)
        return continuation
      }
      granted.append(next)
      guard
        let present = waiting.lazy.filter({ $0.element.continuation != nil })
          .min(by: { LoadLimiter.isBefore($0.element, $1.element) }),
        lendGrantedSlot(to: present.element.priority)
      else { return nil }
      let task = waiting.remove(present.id)!
      hold(task.ticket)
      return task.continuation
    }

    /// A task found every slot taken: it may take one granted to a place whose task has not come
    /// yet, if that place is not more urgent. The place goes back to the queue, at its turn, and
    /// gets the next slot that frees. Without this, a load granted a slot that first waits for
    /// its declared dependencies — another key of this loader, whose load needs a slot — would
    /// wait for itself.
    mutating func lendGrantedSlot(to priority: ClaimPriority) -> Bool {
      let candidates = granted.indices.filter { granted[$0].priority <= priority }
      // The least urgent of them, the newest among equals.
      guard let index = candidates.max(by: { LoadLimiter.isBefore(granted[$0], granted[$1]) }) else { return false }
      let place = granted.remove(at: index)
      waiting.append(place, id: place.order)
      return true
    }

    /// Removes the place reserved for `ticket`'s attempt, granted or waiting without a task;
    /// a granted slot goes to the next waiter.
    mutating func dropReservation(_ ticket: Ticket, attempt: UInt64?) -> Continuation? {
      if let index = granted.firstIndex(where: { $0.isFor(ticket, attempt: attempt) }) {
        granted.remove(at: index)
        return handOver()
      }
      if let place = waiting.first(where: { $0.element.continuation == nil && $0.element.isFor(ticket, attempt: attempt) }) {
        _ = waiting.remove(place.id)
      }
      return nil
    }
  }

  let state: Mutex<State>

  init(limit: Int) {
    self.limit = max(limit, 1)
    state = Mutex(State(limit: self.limit))
  }

  /// How many keys may load at once.
  let limit: Int

  var peak: Int { state.withLock(owner: self) { $0.peak } }

  /// How many loads wait for a slot, reserved or with their tasks waiting (for tests).
  var waitingCount: Int { state.withLock(owner: self) { $0.waiting.count } }

  /// How many slots are taken, by running loads and by granted places (for tests).
  var takenCount: Int { state.withLock(owner: self) { $0.taken } }

  /// How many loads wait for a slot and how many hold one (running, or granted one that their
  /// task has not come for yet), in one read.
  var counts: (waiting: Int, running: Int) { state.withLock(owner: self) { ($0.waiting.count, $0.taken) } }

  /// Whether a load of `ticket`'s key runs on the key's slot.
  func holds(_ ticket: Ticket) -> Bool {
    state.withLock(owner: self) { $0.holders[ticket] != nil }
  }

  /// Whether `ticket`'s key has a load waiting for a slot (reserved, or its task waiting).
  func isWaiting(_ ticket: Ticket) -> Bool {
    state.withLock(owner: self) { state in state.waiting.contains { $0.element.ticket == ticket } }
  }

  /// Reserves a place for `attempt` of `ticket`'s key, which its claim just started: a free slot
  /// is granted to it at once, otherwise it waits in the queue at `priority`. Called under the
  /// loader's lock; resumes nothing.
  func reserve(_ ticket: Ticket, attempt: UInt64, priority: ClaimPriority) {
    state.withLock(owner: self) { state in
      state.order += 1
      let place = Waiter(ticket: ticket, attempt: attempt, priority: priority, order: state.order, continuation: nil)
      if state.taken < state.limit {
        state.take()
        state.granted.append(place)
      } else {
        state.waiting.append(place, id: place.order)
      }
    }
  }

  /// `attempt` of `ticket`'s key ended: a place still reserved for it is given back. Called under
  /// the loader's lock: the caller resumes the continuation returned, if any, after it.
  func cancelReservation(_ ticket: Ticket, attempt: UInt64) -> Continuation? {
    state.withLock(owner: self) { $0.dropReservation(ticket, attempt: attempt) }
  }

  /// Waits for a slot: the one granted to the place reserved for `attempt`, or the slot that
  /// place gets when its turn comes, or else a new place at `priority`. Throws
  /// `CancellationError`, without keeping a slot, when the task is cancelled first — also when
  /// the cancellation comes after the slot was granted but before the task resumed, so a load
  /// whose claims ended meanwhile never calls the data source.
  func acquire(_ ticket: Ticket, attempt: UInt64?, priority: ClaimPriority) async throws {
    try await waitForSlot(ticket, attempt: attempt, priority: priority)
    if Task.isCancelled {
      release(ticket)
      throw CancellationError()
    }
  }

  private enum Start {
    case run
    /// Runs on the slot its key holds; the place reserved for it, if it was granted a slot of its
    /// own, gives that slot to `next`.
    case share(next: Continuation?)
    case wait
    case cancelled(next: Continuation?)
  }

  private func waitForSlot(_ ticket: Ticket, attempt: UInt64?, priority: ClaimPriority) async throws {
    try await withTaskCancellationHandler {
      defer { ContinuationHandoff.awaited() }
      try await withUnsafeThrowingContinuation { (continuation: Continuation) in
        let start = state.withLock(owner: self) { state -> Start in
          if Task.isCancelled { return .cancelled(next: state.dropReservation(ticket, attempt: attempt)) }
          // The key's stale load still runs: the fresh one shares its slot, and waits for nothing.
          if state.holders[ticket] != nil {
            state.hold(ticket)
            return .share(next: state.dropReservation(ticket, attempt: attempt))
          }
          if let index = state.granted.firstIndex(where: { $0.isFor(ticket, attempt: attempt) }) {
            state.granted.remove(at: index)
            state.hold(ticket)
            return .run
          }
          if let place = state.waiting.first(where: { $0.element.continuation == nil && $0.element.isFor(ticket, attempt: attempt) }) {
            // A task whose place a claim reserved meets the rule a task without one meets: it
            // borrows a kept slot whose load is not more urgent (it waited behind it).
            if state.lendGrantedSlot(to: place.element.priority) {
              _ = state.waiting.remove(place.id)
              state.hold(ticket)
              return .run
            }
            state.waiting.update(place.id) { $0.continuation = continuation }
            return .wait
          }
          if state.taken < state.limit {
            state.take()
            state.hold(ticket)
            return .run
          }
          if state.lendGrantedSlot(to: priority) {
            state.hold(ticket)
            return .run
          }
          state.order += 1
          state.waiting.append(
            Waiter(ticket: ticket, attempt: attempt, priority: priority, order: state.order, continuation: continuation),
            id: state.order)
          return .wait
        }
        switch start {
        case .run: continuation.resume()
        case .share(let next):
          next?.handOff()
          continuation.resume()
        case .wait: break
        case .cancelled(let next):
          next?.handOff()
          continuation.resume(throwing: CancellationError())
        }
      }
    } onCancel: {
      // This attempt's task waiting here, if it is waiting yet (otherwise it sees the cancellation
      // under the lock above); not another attempt of the same key.
      let removed = state.withLock(owner: self) { state -> Waiter? in
        guard let place = state.waiting.first(where: { $0.element.continuation != nil && $0.element.isFor(ticket, attempt: attempt) })
        else {
          return nil
        }
        return state.waiting.remove(place.id)
      }
      removed?.continuation?.handOff(throwing: CancellationError())
    }
  }

  /// A load of `ticket`'s key returned: the key's slot goes to the most urgent waiter, if any,
  /// once none of the key's loads runs any more.
  func release(_ ticket: Ticket) {
    let next = state.withLock(owner: self) { $0.leave(ticket) }
    next?.handOff()
  }

  /// The key's claims changed priority: its waiting load moves in the queue. Called under the
  /// loader's lock, so the queue follows the claims in the order they changed. Returns the tasks
  /// that borrow a kept slot now, to be resumed after the lock.
  @discardableResult
  func reprioritize(_ ticket: Ticket, to priority: ClaimPriority) -> [Continuation] {
    state.withLock(owner: self) { state -> [Continuation] in
      state.waiting.updateEach { place in
        if place.ticket == ticket { place.priority = priority }
      }
      // A slot kept for the key is lent by the key's current rank: a task that finds every slot
      // taken borrows a kept slot only when its own load is at least as urgent.
      for index in state.granted.indices where state.granted[index].ticket == ticket {
        state.granted[index].priority = priority
      }
      // Ranks moved: a task already waiting may now borrow a kept slot, under the rule a task
      // coming now would meet (without it, a kept slot whose load waits for a key queued behind
      // it, raised by that wait, held both for good). No kept slot, nothing to lend: a claim's
      // change of priority pays no look at the queue.
      guard !state.granted.isEmpty else { return [] }
      var lent: [Continuation] = []
      while let present = state.waiting.lazy.filter({ $0.element.continuation != nil })
        .min(by: { LoadLimiter.isBefore($0.element, $1.element) }),
        state.lendGrantedSlot(to: present.element.priority)
      {
        let task = state.waiting.remove(present.id)!
        state.hold(task.ticket)
        lent.append(task.continuation!)
      }
      return lent
    }
  }

  /// Whether `a` goes before `b`: higher priority first, then first come.
  static func isBefore(_ a: Waiter, _ b: Waiter) -> Bool {
    a.priority != b.priority ? a.priority > b.priority : a.order < b.order
  }
}
