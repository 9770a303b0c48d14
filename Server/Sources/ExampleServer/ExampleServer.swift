import ExampleServices
import Foundation
import Hummingbird
import LoadableKit

/// An HTTP server for the playgrounds' example services: it serves what `ExampleServices`
/// serves in-process, under one prefix per service.
///
/// - `GET /portal/sharing/rest/portals/self`, `/portal/sharing/rest/content/items/<id>`,
///   `/portal/sharing/rest/content/items/<id>/data`
/// - `GET /portal/sharing/rest/search?q=…&start=…&num=…`: a page of a portal search, with ArcGIS
///   REST's `total`, `start`, `num` and `nextStart` (`-1` on the last page)
/// - `GET /gis/<service path>`, `/gis/<feature service>/<layer>`, `/gis/<map service>/tile/<level>/<row>/<column>`
/// - `GET /geocode/GeocodeServer`, `/geocode/GeocodeServer/findAddressCandidates?text=…&maxResults=…&minScore=…&countryCode=…`,
///   `/geocode/GeocodeServer/reverseGeocode?x=…&y=…`
/// - `POST /gp/<task>/submitJob`, `GET /gp/jobs/<id>`, `POST /gp/jobs/<id>/cancel`, `GET /gp/jobs/<id>/result`:
///   the job service (see `JobRoutes`), its jobs kept in a directory of their own.
/// - `GET /portal/sharing/rest/content/items/<id>/info/thumbnail/thumbnail.png` and the admin
///   endpoints `/admin/thumbnails/…`: the thumbnail service (see `ThumbnailRoutes`).
/// - `GET /admin/log`: the request log as text; `POST /admin/staging?…`: see ``Staging``;
///   `POST /admin/jobs/clock?offsetSeconds=…`: moves the job service's clock;
///   `POST /admin/release?tag=…`: releases the requests held with `X-Hold: <tag>`; `GET /admin/ping`:
///   answers `example-server` (the playgrounds ask it first, to tell a server that is not there).
///
/// Latency, outages and faults come from ``Staging``. Every request is logged in ``log`` with
/// its outcome; a client that closes its connection before the answer cancels the handler and
/// is logged as ``RequestLog/Outcome/clientWentAway``.
public final class ExampleServer: Sendable {
  /// Every request and its outcome.
  public let log: RequestLog
  private let services = RedlandsServices(latency: .zero)
  private let staging = StagingTable()
  private let jobs: Result<JobRoutes, any Error>
  private let thumbnails = ThumbnailRoutes()
  private let gate = RequestGate()

  /// Creates a server that logs its requests in `log` and keeps the job service's jobs in
  /// `jobsDirectory` (a new temporary directory by default).
  public init(log: RequestLog = RequestLog(), jobsDirectory: URL? = nil) {
    self.log = log
    let directory =
      jobsDirectory
      ?? FileManager.default.temporaryDirectory.appendingPathComponent("example-server-jobs-\(UUID().uuidString.prefix(8))")
    jobs = Result { try JobRoutes(directory: directory) }
  }

  /// The Hummingbird application, listening on `host`:`port` (0 picks a free port); it calls
  /// `onRunning` with the port once it listens.
  public func application(
    host: String = "127.0.0.1", port: Int = 0, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
  ) -> some ApplicationProtocol {
    let router = Router()
    router.get("/admin/ping") { _, _ in "example-server\n" }
    router.post("/admin/release") { [gate] request, _ -> String in
      guard let tag = request.uri.queryParameters.get("tag") else {
        throw HTTPError(.badRequest, message: "release takes ?tag=<the X-Hold of the requests>")
      }
      gate.release(tag)
      return "released \(tag)\n"
    }
    thumbnails.addRoutes(to: router)
    router.get("/admin/log") { [log] _, _ in
      log.entries.map(\.description).joined(separator: "\n") + "\n"
    }
    router.post("/admin/staging") { [staging] request, _ -> String in
      let query = request.uri.queryParameters
      let service = query.get("service") ?? "all"
      var value = Staging()
      if let milliseconds = query.get("latencyMs", as: Int.self) { value.latency = .milliseconds(max(0, milliseconds)) }
      if query.get("down") == "true" { value.status = 503 }
      value.retryAfterSeconds = query.get("retryAfter", as: Int.self)
      staging.set(value == Staging() ? nil : value, for: service)
      return "\(service): \(value)\n"
    }
    router.post("/admin/jobs/clock") { [jobs] request, _ -> String in
      guard let seconds = request.uri.queryParameters.get("offsetSeconds", as: Double.self) else {
        throw HTTPError(.badRequest, message: "offsetSeconds takes a number of seconds")
      }
      try jobs.get().setClockOffset(seconds)
      return "job service clock: wall clock + \(seconds) s\n"
    }
    router.get("**") { [self] request, _ in try await self.respond(to: request) }
    // The router matches the longest path first: `/gp/**` needs its GET routes too.
    router.get("/gp/**") { [self] request, _ in try await self.respond(to: request) }
    router.post("/gp/**") { [self] request, _ in try await self.respond(to: request) }
    return Application(
      router: router,
      configuration: .init(address: .hostname(host, port: port), serverName: "example-server"),
      onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }
    )
  }

  private func respond(to request: Request) async throws -> Response {
    let path = request.uri.path
    let target = request.uri.string
    let service = path.split(separator: "/", maxSplits: 1).first.map(String.init) ?? ""
    let stage = staging.staging(for: service).overridden(by: request.headers)
    let number = log.begin(method: "\(request.method)", target: target, held: stage.hold != nil)
    let started = ContinuousClock.now
    do {
      // The handler is cancelled when the client closes its connection.
      let (status, body) = try await request.body.consumeWithCancellationOnInboundClose { _ in
        try await Task.sleep(for: stage.latency)
        if let tag = stage.hold, ThumbnailRoutes.itemID(in: path) == nil { try await self.gate.wait(for: tag) }
        return try await self.answer(method: "\(request.method)", path: path, query: request.uri.queryParameters, stage: stage)
      }
      return respond(number, status: status, body: body, stage: stage, started: started)
    } catch {
      log.end(number, .clientWentAway, after: .now - started)
      throw error
    }
  }

  private func respond(_ number: Int, status: Int, body: Data, stage: Staging, started: ContinuousClock.Instant) -> Response {
    var headers: HTTPFields = [.contentType: "application/json"]
    if let seconds = stage.retryAfterSeconds, status == 503 || status == 429 {
      headers[.retryAfter] = "\(seconds)"
    }
    let log = self.log
    if stage.fault == .cutOff && body.count > 1 {
      let half = body.count / 2
      let buffer = ByteBuffer(bytes: body.prefix(half))
      return Response(
        status: .init(code: status), headers: headers,
        body: ResponseBody(contentLength: body.count) { writer in
          try await writer.write(buffer)
          log.end(number, .cutOff(sent: half, of: body.count), after: .now - started)
          throw CutOff()
        })
    }
    log.end(number, .answered(status: status, bytes: body.count), after: .now - started)
    return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
  }

  private struct CutOff: Error {}

  /// The status and body for `path`.
  ///
  /// - Throws: `CancellationError` when the client went away first.
  private func answer(method: String, path: String, query: Parameters, stage: Staging) async throws -> (Int, Data) {
    if let itemID = ThumbnailRoutes.itemID(in: path) {
      // Before the staged status: the thumbnail service logs a request it fails, as in-process.
      return try await thumbnails.answer(itemID, path: path, stage: stage)
    }
    if let status = stage.status {
      return (status, Self.errorBody(status, HTTPResponse.Status(code: status).reasonPhrase))
    }
    if stage.fault == .malformedJSON { return (200, Data("{\"name\": \"Redlands".utf8)) }
    do {
      return (200, try await route(method: method, path: path, query: query))
    } catch let error as ServiceError {
      return (error.code, Self.errorBody(error.code, error.reason))
    } catch let error as ServerJobError {
      return JobRoutes.answer(for: error)
    } catch {
      return (500, Self.errorBody(500, "\(error)"))
    }
  }

  private static func errorBody(_ code: Int, _ message: String) -> Data {
    let escaped = message.replacingOccurrences(of: "\"", with: "'")
    return Data("{\"error\": {\"code\": \(code), \"message\": \"\(escaped)\"}}".utf8)
  }

  private func route(method: String, path: String, query: Parameters) async throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let parts = path.split(separator: "/").map(String.init)
    guard let service = parts.first else { throw ServiceError.notFound(path) }
    let rest = "/" + parts.dropFirst().joined(separator: "/")
    switch service {
    case "portal":
      let items = "/sharing/rest/content/items/"
      if rest == "/sharing/rest/portals/self" { return try encoder.encode(try await services.portal.portalInfo()) }
      if rest == "/sharing/rest/search" {
        // ArcGIS REST's defaults: the first page, 10 results.
        let start = query.get("start", as: Int.self) ?? 1
        let num = query.get("num", as: Int.self) ?? 10
        return try encoder.encode(try await services.portal.search(query.get("q") ?? "", start: start, num: num))
      }
      if rest.hasPrefix(items) {
        let tail = rest.dropFirst(items.count).split(separator: "/").map(String.init)
        if tail.count == 1 { return try encoder.encode(try await services.portal.item(id: tail[0])) }
        if tail.count == 2, tail[1] == "data" { return try encoder.encode(try await services.portal.webMap(itemID: tail[0])) }
      }
    case "gis":
      if let tile = rest.range(of: "/tile/") {
        let numbers = rest[tile.upperBound...].split(separator: "/").compactMap { Int($0) }
        guard numbers.count == 3 else { throw ServiceError.notFound(path) }
        let key = TileKey(level: numbers[0], row: numbers[1], column: numbers[2])
        return try await services.gis.tile(mapService: String(rest[..<tile.lowerBound].dropFirst()), key)
      }
      if let last = parts.last, let layer = Int(last) {
        let url = parts.dropFirst().dropLast().joined(separator: "/")
        return try encoder.encode(try await services.gis.featureLayer(url: url, layerID: layer))
      }
      return try encoder.encode(try await services.gis.mapService(url: String(rest.dropFirst())))
    case "geocode":
      switch rest {
      case "/GeocodeServer":
        return try encoder.encode(try await services.geocoder.serviceInfo())
      case "/GeocodeServer/findAddressCandidates":
        let found = try await services.geocoder.findAddressCandidates(
          query.get("text") ?? "", maxResults: query.get("maxResults", as: Int.self) ?? 10,
          minScore: query.get("minScore", as: Int.self) ?? 0, countryCode: query.get("countryCode"))
        return try encoder.encode(found)
      case "/GeocodeServer/reverseGeocode":
        let point = Point(x: query.get("x", as: Double.self) ?? 0, y: query.get("y", as: Double.self) ?? 0)
        return try encoder.encode(try await services.geocoder.reverseGeocode(point))
      default: break
      }
    case "gp":
      return try await jobs.get().answer(method: method, path: rest, query: query)
    default: break
    }
    throw ServiceError.notFound(path)
  }
}
