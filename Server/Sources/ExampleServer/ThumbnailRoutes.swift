import ExampleServices
import Foundation
import Hummingbird
import ServiceLifecycle

/// The portal's thumbnail endpoint and its admin endpoints, on a ``ThumbnailService`` of
/// ``ThumbnailCatalog/redlands(count:)``'s items and ``ThumbnailCatalog/portalSearch()``'s, so
/// `swift run Thumbnails --server URL` (and PagedSearch's thumbnails) run against this server
/// (with ``ThumbnailClient``).
///
/// - `GET /portal/sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png`: the thumbnail as
///   JSON (`{"itemID": …, "revision": …}`, a stand-in for the image). With `X-Hold` the
///   service holds the request once it has read the revision to answer with; a client that goes
///   away meanwhile ends it cancelled. `X-Status` fails it after it arrived, so the service's log
///   counts it as failed.
/// - `POST /admin/thumbnails/release`: the held requests are answered, and no more are held.
/// - `POST /admin/thumbnails/upload?item=<id>`: the item's owner uploads a new thumbnail.
/// - `POST /admin/thumbnails/reset`: the first revisions again, an empty log, nothing held.
/// - `GET /admin/thumbnails/log?after=<version>`: the service's ``ThumbnailLog``, as soon as its
///   version is above `after` (at once without `after`), or after 10 s with no change, or at
///   once when the server shuts down.
///
/// The admin `POST`s answer with a ``ThumbnailClient/AdminReply``: the log after the change.
final class ThumbnailRoutes: Sendable {
  private let service: ThumbnailService
  private let changes: ChangeBroadcast

  init() {
    let changes = ChangeBroadcast()
    self.changes = changes
    // The Thumbnails playground's items, and those the PagedSearch playground's search finds.
    service = ThumbnailService(
      items: ThumbnailCatalog.redlands() + ThumbnailCatalog.portalSearch(), latency: .zero, onChange: changes.signal)
  }

  /// The item whose thumbnail `path` (`/portal/sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png`) asks for.
  static func itemID(in path: String) -> String? {
    let parts = path.split(separator: "/")
    guard parts.count == 9, parts[0] == "portal", parts[4] == "items", parts[6...] == ["info", "thumbnail", "thumbnail.png"]
    else { return nil }
    return String(parts[5])
  }

  /// The thumbnail of `itemID`, staged by `stage`.
  ///
  /// - Throws: `CancellationError` when the client went away first.
  func answer(_ itemID: String, path: String, stage: Staging) async throws -> (Int, Data) {
    let failure = stage.status.map { ServiceError(code: $0, reason: Self.reasons[$0] ?? "Error", path: path) }
    do {
      let thumbnail = try await service.thumbnail(for: itemID, held: stage.hold != nil, failure: failure)
      return (200, try JSONEncoder().encode(thumbnail))
    } catch let error as ServiceError {
      return (error.code, Data("{\"error\": {\"code\": \(error.code), \"message\": \"\(error.reason)\"}}".utf8))
    }
  }

  /// The reason phrases of the statuses a staged failure asks for, as the in-process services
  /// say them (`HTTPResponse.Status(code:)` has none).
  private static let reasons: [Int: String] = [
    400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
  ]

  func addRoutes(to router: Router<BasicRequestContext>) {
    router.post("/admin/thumbnails/release") { [service] _, _ in
      service.answerHeldRequests()
      return try Self.reply(service.log)
    }
    router.post("/admin/thumbnails/upload") { [service] request, _ in
      guard let item = request.uri.queryParameters.get("item") else {
        throw HTTPError(.badRequest, message: "upload takes ?item=<item id>")
      }
      let revision = service.uploadNewThumbnail(for: item)
      return try Self.reply(service.log, revision: revision)
    }
    router.post("/admin/thumbnails/reset") { [service] _, _ in
      service.reset()
      return try Self.reply(service.log)
    }
    router.get("/admin/thumbnails/log") { [service, changes] request, _ in
      let after = request.uri.queryParameters.get("after", as: Int.self) ?? -1
      // The wait ends early when the client goes away (as a held request's does) and when the
      // server shuts down gracefully, which answers the log as it is.
      let log = try await request.body.consumeWithCancellationOnInboundClose { _ in
        await cancelWhenGracefulShutdown {
          await changes.wait(upTo: .seconds(10)) {
            let log = service.log
            return log.version > after ? log : nil
          }
        }
      }
      return try Self.json(log ?? service.log)
    }
  }

  private static func reply(_ log: ThumbnailLog, revision: Int? = nil) throws -> Response {
    try json(ThumbnailClient.AdminReply(log: log, revision: revision))
  }

  private static func json(_ value: some Encodable) throws -> Response {
    Response(
      status: .ok, headers: [.contentType: "application/json"],
      body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value))))
  }
}

/// Wakes whoever waits for the next change: one stream per waiter, forgotten when it ends.
final class ChangeBroadcast: Sendable {
  private let watchers = Locked<(next: Int, all: [Int: AsyncStream<Void>.Continuation])>((0, [:]))

  func signal() {
    for watcher in watchers.withLock({ Array($0.all.values) }) { watcher.yield() }
  }

  /// Waits until `value` returns something, asking again after each change, at most `limit`
  /// (or until the task is cancelled, as when the client goes away); `nil` if it never did.
  func wait<T: Sendable>(upTo limit: Duration, _ value: @escaping @Sendable () -> T?) async -> T? {
    let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    let id = watchers.withLock { watchers in
      watchers.next += 1
      watchers.all[watchers.next] = continuation
      return watchers.next
    }
    defer { _ = watchers.withLock { $0.all.removeValue(forKey: id) } }
    continuation.yield()  // check once before the first change
    return await withTaskGroup(of: T?.self) { group in
      group.addTask {
        for await _ in stream {
          if let found = value() { return found }
        }
        return nil
      }
      group.addTask {
        try? await Task.sleep(for: limit)
        return nil
      }
      let first = await group.next() ?? nil
      group.cancelAll()
      continuation.finish()
      return first
    }
  }
}
