import ExampleServices

/// The portal's thumbnail endpoint, simulated:
/// `GET /sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png`.
///
/// Latency and outages come from its ``SimulatedServer``. A request answers with the revision of
/// the item's thumbnail when the request arrived, so a request that is slow to answer can bring
/// back an image older than one uploaded since.
///
/// To make a run deterministic, requests can be *held*: a held request waits until
/// ``answerHeldRequests()``, or until its task is cancelled — a load cancelled while held was
/// certainly not answered. Every request is logged with its outcome, and every change calls
/// `onChange`, so the list can wait until the service has nothing in flight.
final class ThumbnailService: Sendable {
  enum Outcome: Sendable, Equatable {
    /// Answered with this revision; `order` counts the answers (1 for the first).
    case answered(revision: Int, order: Int)
    case failed(String)
    case cancelled
  }

  struct Request: Sendable {
    var number: Int
    var itemID: String
    /// The outcome, or `nil` while the request is in flight.
    var outcome: Outcome?

    /// The revision it answered with and the position of its answer, if it was answered.
    var answer: (revision: Int, order: Int)? {
      if case .answered(let revision, let order) = outcome { (revision, order) } else { nil }
    }
  }

  struct Counts: Sendable {
    var requests = 0
    var answered = 0
    var failed = 0
    var cancelled = 0
    /// Requests in flight, held or not.
    var unfinished = 0
    var held = 0
  }

  private struct State {
    var revisions: [String: Int]
    var log: [Request] = []
    var answers = 0
    var holdsEveryRequest = false
    var holdsNextRequest: Set<String> = []
    /// The requests held now, with the continuation each waits on once it is waiting.
    var held: [Int: CheckedContinuation<Void, any Error>?] = [:]
    var cancelled: Set<Int> = []
  }

  /// The network in front of the endpoint: latency, outages.
  let server: SimulatedServer
  private let state: Locked<State>
  private let onChange: @Sendable () -> Void

  init(items: [CatalogItem], latency: Duration, onChange: @escaping @Sendable () -> Void) {
    server = SimulatedServer(name: "thumbnail service", latency: latency)
    state = Locked(State(revisions: Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.thumbnailRevision) })))
    self.onChange = onChange
  }

  /// `GET …/items/<id>/info/thumbnail/thumbnail.png`: the item's thumbnail.
  func thumbnail(for itemID: String) async throws -> Thumbnail {
    let (number, revision, isHeld) = state.withLock { state in
      let number = state.log.count + 1
      state.log.append(Request(number: number, itemID: itemID))
      let isHeld = state.holdsEveryRequest || state.holdsNextRequest.remove(itemID) != nil
      if isHeld { state.held[number] = .some(nil) }
      return (number, state.revisions[itemID], isHeld)
    }
    onChange()
    do {
      if isHeld { try await waitUntilAnswered(number) }
      let path = "/sharing/rest/content/items/\(itemID)/info/thumbnail/thumbnail.png"
      let thumbnail = try await server.respond(to: path) {
        guard let revision else { throw ServiceError.notFound(path) }
        return Thumbnail(itemID: itemID, revision: revision)
      }
      finish(number) { state in
        state.answers += 1
        return .answered(revision: thumbnail.revision, order: state.answers)
      }
      return thumbnail
    } catch {
      finish(number) { _ in error is CancellationError ? .cancelled : .failed(describe(error)) }
      throw error
    }
  }

  private func finish(_ number: Int, _ outcome: (inout State) -> Outcome) {
    state.withLock { $0.log[number - 1].outcome = outcome(&$0) }
    onChange()
  }

  /// Waits until the held request `number` may go on; throws `CancellationError` if its task is
  /// cancelled first.
  private func waitUntilAnswered(_ number: Int) async throws {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let goOn: Result<Void, any Error>? = state.withLock { state in
          if state.cancelled.contains(number) { return .failure(CancellationError()) }
          guard state.held[number] != nil else { return .success(()) }
          state.held[number] = continuation
          return nil
        }
        if let goOn { continuation.resume(with: goOn) }
      }
    } onCancel: {
      let continuation = state.withLock { state in
        state.cancelled.insert(number)
        return state.held.removeValue(forKey: number)
      }
      continuation??.resume(throwing: CancellationError())
    }
  }

  // MARK: - Controlling it

  /// The item's owner uploads a new thumbnail: its revision goes up by one. Returns the new one.
  @discardableResult
  func uploadNewThumbnail(for itemID: String) -> Int {
    state.withLock { state in
      state.revisions[itemID, default: 0] += 1
      return state.revisions[itemID]!
    }
  }

  /// Holds every request from now on, until ``answerHeldRequests()``: a slow network.
  func holdRequests() {
    state.withLock { $0.holdsEveryRequest = true }
  }

  /// Holds the next request for `itemID` alone, until ``answerHeldRequests()``.
  func holdNextRequest(for itemID: String) {
    state.withLock { _ = $0.holdsNextRequest.insert(itemID) }
  }

  /// Stops holding requests; the held ones go on and are answered.
  func answerHeldRequests() {
    let continuations = state.withLock { state in
      state.holdsEveryRequest = false
      state.holdsNextRequest = []
      defer { state.held = [:] }
      return state.held.values.compactMap { $0 }
    }
    for continuation in continuations { continuation.resume() }
  }

  // MARK: - Reading the log

  /// Every request so far, in the order they arrived.
  var requests: [Request] { state.withLock { $0.log } }

  /// Whether a request for `itemID` is held now.
  func isHolding(_ itemID: String) -> Bool {
    state.withLock { state in state.held.keys.contains { state.log[$0 - 1].itemID == itemID } }
  }

  var counts: Counts {
    state.withLock { state in
      var counts = Counts(requests: state.log.count, held: state.held.count)
      for request in state.log {
        switch request.outcome {
        case nil: counts.unfinished += 1
        case .answered: counts.answered += 1
        case .failed: counts.failed += 1
        case .cancelled: counts.cancelled += 1
        }
      }
      return counts
    }
  }
}
