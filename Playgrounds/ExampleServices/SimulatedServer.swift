import Foundation
import LoadableKit

/// An HTTP-style failure from a simulated server.
public struct ServiceError: RetryAfterError, Hashable, Sendable, CustomStringConvertible {
  /// The HTTP status code.
  public var code: Int
  /// The HTTP reason phrase.
  public var reason: String
  /// The path that was asked for.
  public var path: String
  /// How long the server asked to wait before trying again (its `Retry-After` header), if it did.
  public var retryAfter: Duration?

  public init(code: Int, reason: String, path: String, retryAfter: Duration? = nil) {
    self.code = code
    self.reason = reason
    self.path = path
    self.retryAfter = retryAfter
  }

  public static func unavailable(_ path: String) -> ServiceError {
    ServiceError(code: 503, reason: "Service Unavailable", path: path)
  }

  public static func notFound(_ path: String) -> ServiceError {
    ServiceError(code: 404, reason: "Not Found", path: path)
  }

  public var description: String { "\(code) \(reason)" }
}

/// The network in front of one simulated server: latency, outages, slow paths, and a log.
///
/// Every request waits for the latency with `Task.sleep`, so it is cancellable the way a real
/// request is: cancelling the task that made it ends it at once with `CancellationError`.
public final class SimulatedServer: Sendable {
  private struct State {
    var latency: Duration
    var isDown = false
    /// A scheduled outage: requests still answered before it, then requests that fail.
    var outage: (answered: Int, failing: Int)?
    var slowPaths: [String: Duration] = [:]
    var log: [String] = []
    /// A stall: requests still answered before it, and the tag the requests after it are held under.
    var stall: (answered: Int, tag: String, held: AsyncStream<Void>.Continuation)?
    var stalls = 0
    /// Yields when the stall holds its first request.
    var stallHeld: AsyncStream<Void>?

    /// Counts one request against the stall: the tag to hold it under, if it falls inside it.
    mutating func takeStall() -> String? {
      guard var stall else { return nil }
      if stall.answered == 0 {
        stall.held.yield()
        return stall.tag
      }
      stall.answered -= 1
      self.stall = stall
      return nil
    }

    /// Counts one request against the scheduled outage: whether it falls inside it.
    mutating func takeScheduledOutage() -> Bool {
      guard var schedule = outage else { return false }
      let fails = schedule.answered == 0 && schedule.failing > 0
      if schedule.answered > 0 {
        schedule.answered -= 1
      } else if schedule.failing > 0 {
        schedule.failing -= 1
      }
      outage = schedule.answered == 0 && schedule.failing == 0 ? nil : schedule
      return fails
    }
  }

  /// The server's name, for messages.
  public let name: String
  private let state: Locked<State>
  private let gate = RequestGate()
  /// The HTTP server that answers instead, and the path prefix of this service on it; `nil`
  /// to answer in-process.
  private let remote: (client: HTTPClient, prefix: String)?

  /// Creates a simulated server. With `remote`, requests go over HTTP to the `example-server`
  /// of the `Server/` package, under `prefix`: the latency, outages and slow paths set here are
  /// sent with each request (headers `X-Latency-Ms` and `X-Status`), so the real server waits
  /// and fails as this one would, and the request log here stays the same.
  public init(name: String, latency: Duration, remote: HTTPClient? = nil, prefix: String = "") {
    self.name = name
    state = Locked(State(latency: latency))
    self.remote = remote.map { ($0, prefix) }
  }

  /// Whether requests go over HTTP.
  public var isRemote: Bool { remote != nil }

  /// How long every request takes.
  public var latency: Duration {
    get { state.withLock { $0.latency } }
    set { state.withLock { $0.latency = newValue } }
  }

  /// During an outage every request fails with `503 Service Unavailable`.
  public var isDown: Bool {
    get { state.withLock { $0.isDown } }
    set { state.withLock { $0.isDown = newValue } }
  }

  /// Schedules an outage by request count, so it hits the same request on every run: the server
  /// answers the next `answered` requests, fails the `failing` requests after them with
  /// `503 Service Unavailable`, and then answers again. A new schedule replaces the previous one.
  public func scheduleOutage(after answered: Int, failing: Int) {
    state.withLock { $0.outage = (max(0, answered), max(0, failing)) }
  }

  /// Stalls the network after the next `answered` requests: the requests after them are held,
  /// sent but not answered, until ``releaseHeldRequests()`` (or until their tasks are cancelled).
  ///
  /// It makes a run land at the same request every time: a job that follows its progress and
  /// pauses, or cancels, finds the next request held rather than on its way. Over HTTP the
  /// example server holds them (header `X-Hold`).
  public func holdRequests(after answered: Int) {
    let (held, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    let replaced = state.withLock { state in
      state.stalls += 1
      defer {
        // Unique across processes: runs against the same example server must not release each other's.
        state.stall = (max(0, answered), "\(name) stall \(state.stalls) \(Self.process)", continuation)
        state.stallHeld = held
      }
      return state.stall?.held
    }
    replaced?.finish()
  }

  private static let process = UUID().uuidString.prefix(8)

  /// Waits until the stall of ``holdRequests(after:)`` holds a request (at once if it did, or if
  /// there is no stall): then whoever made that request waits for its answer.
  public func waitUntilRequestHeld() async {
    guard let held = state.withLock({ $0.stallHeld }) else { return }
    for await _ in held { return }
  }

  /// Ends the stall of ``holdRequests(after:)``: the held requests go on.
  ///
  /// - Throws: Over HTTP, what the example server's `POST /admin/release` throws.
  public func releaseHeldRequests() async throws {
    let stall = state.withLock { state in
      defer { (state.stall, state.stallHeld) = (nil, nil) }
      return state.stall
    }
    guard let stall else { return }
    stall.held.finish()
    let tag = stall.tag
    guard let remote else { return gate.release(tag) }
    let path = "/admin/release"
    let (_, http) = try await remote.client.send("POST", path, query: [URLQueryItem(name: "tag", value: tag)])
    guard (200..<300).contains(http.statusCode) else { throw HTTPClient.serviceError(http, path: path) }
  }

  /// Makes requests for paths that contain `fragment` take `delay` longer (`nil` makes them
  /// fast again).
  public func slowDown(_ fragment: String, by delay: Duration?) {
    state.withLock { $0.slowPaths[fragment] = delay }
  }

  /// Every path requested so far, in the order the requests arrived.
  public var requestLog: [String] { state.withLock { $0.log } }

  /// How many requests asked for `path`.
  public func requestCount(path: String) -> Int {
    state.withLock { $0.log.filter { $0 == path }.count }
  }

  /// Answers a request for `path`: waits for the latency, fails during an outage (``isDown``, or
  /// one scheduled with ``scheduleOutage(after:failing:)``), and otherwise returns what `answer`
  /// returns (or throws).
  public func respond<T: Sendable>(to path: String, _ answer: () throws -> T) async throws -> T {
    let (delay, fails, stall) = arrive(path)
    if let stall { try await gate.wait(for: stall) }
    try await Task.sleep(for: delay)
    if isDown || fails { throw ServiceError.unavailable(path) }
    return try answer()
  }

  /// Like ``respond(to:_:)``, for a JSON answer: over HTTP when the server is remote.
  public func respondJSON<T: Codable & Sendable>(
    to path: String, query: [URLQueryItem] = [], _ answer: () throws -> T
  ) async throws -> T {
    guard let remote else { return try await respond(to: path, answer) }
    return try await remote.client.get(
      T.self, remote.prefix + path, query: query, headers: staging(for: path))
  }

  /// Like ``respond(to:_:)``, for an answer of bytes: over HTTP when the server is remote.
  public func respondData(to path: String, _ answer: () throws -> Data) async throws -> Data {
    guard let remote else { return try await respond(to: path, answer) }
    return try await remote.client.get(remote.prefix + path, headers: staging(for: path))
  }

  /// Logs a request for `path`: how long it takes, whether it falls in an outage, and the tag
  /// of the stall it is held in, if any.
  private func arrive(_ path: String) -> (delay: Duration, fails: Bool, stall: String?) {
    state.withLock { state in
      state.log.append(path)
      let extra = state.slowPaths.first { path.contains($0.key) }?.value ?? .zero
      let inScheduledOutage = state.takeScheduledOutage()
      return (state.latency + extra, state.isDown || inScheduledOutage, state.takeStall())
    }
  }

  /// The headers that tell the real server to answer as this one would; counts the request
  /// in the log and against a scheduled outage.
  func staging(for path: String) -> [String: String] {
    let (delay, fails, stall) = arrive(path)
    let (seconds, attoseconds) = delay.components
    var headers = ["X-Latency-Ms": "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)"]
    if fails { headers["X-Status"] = "503" }
    if let stall { headers["X-Hold"] = stall }
    return headers
  }
}

