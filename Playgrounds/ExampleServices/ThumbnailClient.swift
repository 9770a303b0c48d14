import Foundation

/// The thumbnail endpoint of the example server (`Server/`), over HTTP: what the Thumbnails
/// playground uses with `--server URL`.
///
/// The server runs a ``ThumbnailService`` and answers
/// `GET /portal/sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png` with it. This client
/// stages each request as the in-process service would, with headers: `X-Hold: true` for a
/// request to hold (``holdRequests()``, ``holdNextRequest(for:)``), and the latency and outages
/// of ``server`` (`X-Latency-Ms`, `X-Status`). The admin endpoints do the rest:
/// `POST /admin/thumbnails/release` answers the held requests,
/// `POST /admin/thumbnails/upload?item=<id>` uploads a new revision, and
/// `POST /admin/thumbnails/reset` starts again.
///
/// ``log`` is the server's own log, so the counts the playground prints are what the server
/// saw: a held request whose load is cancelled shows as cancelled when the server saw the
/// client go away. The client keeps its copy current by asking
/// `GET /admin/thumbnails/log?after=<version>`, which answers as soon as the log changes.
public final class ThumbnailClient: ThumbnailServing {
  private struct State {
    var holds = ThumbnailHolds()
    var log = ThumbnailLog()
    /// Answers (thumbnails or errors of the service) this client received.
    var answersReceived = 0
    /// The held requests whose loads wait for them, by a number of this client's: their items.
    /// A request leaves when its call returns, or at once when its task is cancelled: the server
    /// hears of that a moment later.
    var heldInFlight: [Int: String] = [:]
    var lastCall = 0

    mutating func adopt(_ newer: ThumbnailLog) -> Bool {
      guard newer.version > log.version else { return false }
      log = newer
      return true
    }
  }

  /// What the admin endpoints answer: the log after the change, and the new revision of an upload.
  public struct AdminReply: Sendable, Codable {
    public var log: ThumbnailLog
    public var revision: Int?

    public init(log: ThumbnailLog, revision: Int? = nil) {
      self.log = log
      self.revision = revision
    }
  }

  /// The latency and outages, sent with each request.
  public let server: SimulatedServer
  private let client: HTTPClient
  private let logClient: HTTPClient
  private let state = Locked(State())
  private let onChange: @Sendable () -> Void
  private let follower = Locked<Task<Void, Never>?>(nil)

  /// Connects to the example server at `baseURL`: resets its thumbnail service, so the run starts
  /// from the first revisions with an empty log, and follows its log. Requests take `latency`.
  ///
  /// - Throws: ``NetworkError`` when the server cannot be reached, ``ServiceError`` when it
  ///   answers with an error.
  public init(baseURL: URL, latency: Duration, onChange: @escaping @Sendable () -> Void) async throws {
    // Every request a run holds has a connection of its own (a request waiting for a connection
    // would never reach the server to be held), and the log has a session of its own.
    client = HTTPClient(baseURL: baseURL, maximumConnections: 64)
    logClient = HTTPClient(baseURL: baseURL)
    server = SimulatedServer(name: "thumbnail service", latency: latency)
    self.onChange = onChange
    let reply = try await admin("reset")
    state.withLock { _ = $0.adopt(reply.log) }
    let task = Task.detached { await self.follow() }
    follower.withLock { $0 = task }
  }

  /// Stops following the server's log. Call it when the run is over: until then the client
  /// keeps a request to the server open.
  public func stop() {
    follower.withLock { $0 }?.cancel()
  }

  public func thumbnail(for itemID: String) async throws -> Thumbnail {
    let path = thumbnailPath(itemID)
    var headers = server.staging(for: path)
    let call = state.withLock { state -> Int? in
      guard state.holds.take(itemID) else { return nil }
      state.lastCall += 1
      state.heldInFlight[state.lastCall] = itemID
      return state.lastCall
    }
    guard let call else { return try await get(path, headers: headers) }
    headers["X-Hold"] = "true"
    @Sendable func leave() {
      if state.withLock({ $0.heldInFlight.removeValue(forKey: call) }) != nil { onChange() }
    }
    defer { leave() }
    return try await withTaskCancellationHandler {
      try await get(path, headers: headers)
    } onCancel: {
      leave()
    }
  }

  private func get(_ path: String, headers: [String: String]) async throws -> Thumbnail {
    do {
      let thumbnail = try await client.get(Thumbnail.self, "/portal" + path, headers: headers)
      received()
      return thumbnail
    } catch let error as ServiceError {
      received()
      throw error
    }
  }

  private func received() {
    state.withLock { $0.answersReceived += 1 }
    onChange()
  }

  public func holdRequests() {
    state.withLock { $0.holds.everyRequest = true }
  }

  public func holdNextRequest(for itemID: String) {
    state.withLock { _ = $0.holds.nextRequest.insert(itemID) }
  }

  public func answerHeldRequests() async throws {
    state.withLock { $0.holds = ThumbnailHolds() }
    adopt(try await admin("release"))
  }

  public func uploadNewThumbnail(for itemID: String) async throws -> Int {
    let reply = try await admin("upload", query: [URLQueryItem(name: "item", value: itemID)])
    adopt(reply)
    guard let revision = reply.revision else {
      throw NetworkError(code: .malformedResponse, path: "/admin/thumbnails/upload", message: "the answer has no revision")
    }
    return revision
  }

  /// The server's log, as of its last change this client heard of.
  public var log: ThumbnailLog { state.withLock { $0.log } }

  /// Whether ``log`` counts every answer this client received (the server logs a request's
  /// outcome before it sends the answer, so a log without it is not the newest yet), and holds no
  /// request this client stopped waiting for: a load cancelled while its request was held
  /// (superseded, scrolled away) ends the request here at once, and on the server when it sees
  /// the client go away. Until then, a release of the held requests would answer it.
  public var logIsCurrent: Bool {
    state.withLock { state in
      let counts = state.log.counts
      guard counts.answered + counts.failed >= state.answersReceived else { return false }
      var heldHere: [String: Int] = [:]
      for itemID in state.heldInFlight.values { heldHere[itemID, default: 0] += 1 }
      var heldThere: [String: Int] = [:]
      for request in state.log.requests where state.log.held.contains(request.number) {
        heldThere[request.itemID, default: 0] += 1
      }
      return heldThere.allSatisfy { item, count in count <= heldHere[item, default: 0] }
    }
  }

  private func admin(_ action: String, query: [URLQueryItem] = []) async throws -> AdminReply {
    let path = "/admin/thumbnails/\(action)"
    let (data, http) = try await client.send("POST", path, query: query)
    guard (200..<300).contains(http.statusCode) else { throw HTTPClient.serviceError(http, path: path) }
    return try HTTPClient.decode(AdminReply.self, data, path: path)
  }

  private func adopt(_ reply: AdminReply) {
    if state.withLock({ $0.adopt(reply.log) }) { onChange() }
  }

  /// Asks for the log after each change, until cancelled.
  private func follow() async {
    while !Task.isCancelled {
      let version = log.version
      do {
        let newer = try await logClient.get(
          ThumbnailLog.self, "/admin/thumbnails/log", query: [URLQueryItem(name: "after", value: "\(version)")])
        if state.withLock({ $0.adopt(newer) }) { onChange() }
      } catch is CancellationError {
        return
      } catch {
        FileHandle.standardError.write(Data("thumbnail log: \(describe(error)); following it stops\n".utf8))
        return
      }
    }
  }
}
