/// The portal's thumbnail endpoint, simulated:
/// `GET /sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png`.
///
/// The Thumbnails playground uses it in-process, and the example server (`Server/`) answers
/// with it over HTTP. Latency and outages come from its ``SimulatedServer``. A request answers
/// with the revision of the item's thumbnail when the request arrived, so a request that is slow
/// to answer can bring back an image older than one uploaded since.
///
/// To make a run deterministic, requests can be *held*: a held request waits until
/// ``answerHeldRequests()``, or until its task is cancelled — a load cancelled while held was
/// certainly not answered. Every request is logged with its outcome, and every change calls
/// `onChange`, so the list can wait until the service has nothing in flight.
public final class ThumbnailService: ThumbnailServing {
  /// The most requests the log keeps; older ones are dropped.
  public static let capacity = 10_000

  private struct State {
    var initialRevisions: [String: Int]
    var revisions: [String: Int]
    var log = ThumbnailLog()
    /// Numbers go on across resets, so a request from before a reset never finds a newer one.
    var lastNumber = 0
    var answers = 0
    var holds = ThumbnailHolds()
    /// The requests held now, with the continuation each waits on once it is waiting.
    var held: [Int: CheckedContinuation<Void, any Error>?] = [:]
    var cancelled: Set<Int> = []

    /// The index in the log of request `number`, if the log still has it.
    func index(of number: Int) -> Int? {
      guard let first = log.requests.first?.number, number >= first, number - first < log.requests.count else { return nil }
      return number - first
    }

    mutating func changed() {
      log.version += 1
      log.held = Set(held.keys)
    }
  }

  /// The network in front of the endpoint: latency, outages.
  public let server: SimulatedServer
  private let state: Locked<State>
  private let onChange: @Sendable () -> Void

  /// A service for `items`, whose requests take `latency`; it calls `onChange` after every change.
  public init(items: [ThumbnailCatalog.Item], latency: Duration, onChange: @escaping @Sendable () -> Void) {
    server = SimulatedServer(name: "thumbnail service", latency: latency)
    let revisions = Dictionary(items.map { ($0.id, $0.revision) }, uniquingKeysWith: { first, _ in first })
    state = Locked(State(initialRevisions: revisions, revisions: revisions))
    self.onChange = onChange
  }

  /// `GET …/items/<id>/info/thumbnail/thumbnail.png`: the item's thumbnail, held if
  /// ``holdRequests()`` or ``holdNextRequest(for:)`` says so.
  public func thumbnail(for itemID: String) async throws -> Thumbnail {
    try await thumbnail(for: itemID, held: nil)
  }

  /// The item's thumbnail: held if `held` says so (`nil`: as ``holdRequests()`` and
  /// ``holdNextRequest(for:)`` say), then, after the server's latency, answered or failed with
  /// `failure` (the example server's staged outages).
  ///
  /// - Throws: `CancellationError` if the task is cancelled first; ``ServiceError`` when the item
  ///   has no thumbnail, the server is down, or `failure` is given.
  public func thumbnail(for itemID: String, held: Bool?, failure: ServiceError? = nil) async throws -> Thumbnail {
    let (number, revision, isHeld) = state.withLock { state in
      state.lastNumber += 1
      let number = state.lastNumber
      state.log.requests.append(ThumbnailRequest(number: number, itemID: itemID))
      if state.log.requests.count > Self.capacity {
        state.log.requests.removeFirst()
        state.log.dropped += 1
      }
      let isHeld = held ?? state.holds.take(itemID)
      if isHeld { state.held[number] = .some(nil) }
      state.changed()
      return (number, state.revisions[itemID], isHeld)
    }
    onChange()
    do {
      if isHeld { try await waitUntilAnswered(number) }
      let path = thumbnailPath(itemID)
      let thumbnail = try await server.respond(to: path) {
        if let failure { throw failure }
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

  private func finish(_ number: Int, _ outcome: (inout State) -> ThumbnailRequest.Outcome) {
    state.withLock { state in
      let outcome = outcome(&state)
      if let index = state.index(of: number) { state.log.requests[index].outcome = outcome }
      state.changed()
    }
    onChange()
  }

  /// Waits until the held request `number` may go on; throws `CancellationError` if its task is
  /// cancelled first.
  private func waitUntilAnswered(_ number: Int) async throws {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let goOn: Result<Void, any Error>? = state.withLock { state in
          if state.cancelled.remove(number) != nil { return .failure(CancellationError()) }
          guard state.held[number] != nil else { return .success(()) }
          state.held[number] = continuation
          return nil
        }
        if let goOn { continuation.resume(with: goOn) }
      }
    } onCancel: {
      let continuation = state.withLock { state in
        guard let waiting = state.held.removeValue(forKey: number) else { return nil as CheckedContinuation<Void, any Error>? }
        if waiting == nil { state.cancelled.insert(number) }  // it has not waited yet: it will see this
        state.changed()
        return waiting
      }
      continuation?.resume(throwing: CancellationError())
      onChange()
    }
  }

  // MARK: - Controlling it

  /// The item's owner uploads a new thumbnail: its revision goes up by one. Returns the new one.
  @discardableResult
  public func uploadNewThumbnail(for itemID: String) -> Int {
    let revision = state.withLock { state in
      state.revisions[itemID, default: 0] += 1
      state.changed()
      return state.revisions[itemID]!
    }
    onChange()
    return revision
  }

  /// Holds every request from now on, until ``answerHeldRequests()``: a slow network.
  public func holdRequests() {
    state.withLock { $0.holds.everyRequest = true }
  }

  /// Holds the next request for `itemID` alone, until ``answerHeldRequests()``.
  public func holdNextRequest(for itemID: String) {
    state.withLock { _ = $0.holds.nextRequest.insert(itemID) }
  }

  /// Stops holding requests; the held ones go on and are answered.
  public func answerHeldRequests() {
    let continuations = state.withLock { state in
      state.holds = ThumbnailHolds()
      defer {
        state.held = [:]
        state.changed()
      }
      return state.held.values.compactMap { $0 }
    }
    for continuation in continuations { continuation.resume() }
    onChange()
  }

  /// Starts again: the thumbnails' first revisions, an empty log, nothing held (held requests go
  /// on and are answered). The log's ``ThumbnailLog/version`` keeps going up.
  public func reset() {
    let continuations = state.withLock { state in
      let continuations = state.held.values.compactMap { $0 }
      let (version, lastNumber) = (state.log.version, state.lastNumber)
      state = State(initialRevisions: state.initialRevisions, revisions: state.initialRevisions)
      (state.log.version, state.lastNumber) = (version, lastNumber)
      state.changed()
      return continuations
    }
    for continuation in continuations { continuation.resume() }
    onChange()
  }

  // MARK: - Reading the log

  public var log: ThumbnailLog { state.withLock { $0.log } }

  /// Always: this is the service itself.
  public var logIsCurrent: Bool { true }

  /// Whether the log has a request for `itemID` in flight that is not held: it is the service
  /// itself, so it has every request the process sent.
  public func isSendingUnheldRequest(for itemID: String) -> Bool {
    let log = log
    return log.requests.contains { $0.itemID == itemID && $0.outcome == nil && !log.held.contains($0.number) }
  }
}
