/// Requests held until they are released, each under a tag: a network that stalls at a point a
/// run chooses, so that what happens there (a pause, a cancel) lands at the same request on every
/// run. ``SimulatedServer`` holds its requests here in-process, and the example server its own.
public final class RequestGate: Sendable {
  /// The most released tags remembered: a request that arrives with an older one waits.
  public static let releasedCapacity = 1_000

  private struct State {
    var lastTicket = 0
    /// The requests held now, with the continuation each waits on once it is waiting.
    var held: [Int: (tag: String, continuation: CheckedContinuation<Void, any Error>?)] = [:]
    /// Held requests cancelled before they waited.
    var cancelled: Set<Int> = []
    /// Tags released, oldest first: a request that arrives with one of them goes on at once.
    var released: [String] = []
  }

  private let state = Locked(State())

  public init() {}

  /// How many requests are held now.
  public var heldCount: Int { state.withLock { $0.held.count } }

  /// Waits until `tag` is released; returns at once if it was.
  ///
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func wait(for tag: String) async throws {
    let ticket: Int? = state.withLock { state in
      if state.released.contains(tag) { return nil }
      state.lastTicket += 1
      state.held[state.lastTicket] = (tag, nil)
      return state.lastTicket
    }
    guard let ticket else { return }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let goOn: Result<Void, any Error>? = state.withLock { state in
          if state.cancelled.remove(ticket) != nil { return .failure(CancellationError()) }
          guard state.held[ticket] != nil else { return .success(()) }
          state.held[ticket]?.continuation = continuation
          return nil
        }
        if let goOn { continuation.resume(with: goOn) }
      }
    } onCancel: {
      let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
        guard let waiting = state.held.removeValue(forKey: ticket) else { return nil }
        if waiting.continuation == nil { state.cancelled.insert(ticket) }  // it has not waited yet: it will see this
        return waiting.continuation
      }
      continuation?.resume(throwing: CancellationError())
    }
  }

  /// Releases the requests held under `tag`, and those that arrive with it later.
  public func release(_ tag: String) {
    let continuations = state.withLock { state in
      state.released.append(tag)
      if state.released.count > Self.releasedCapacity { state.released.removeFirst() }
      let tickets = state.held.filter { $0.value.tag == tag }.map(\.key)
      return tickets.compactMap { state.held.removeValue(forKey: $0)?.continuation }
    }
    for continuation in continuations { continuation.resume() }
  }
}
