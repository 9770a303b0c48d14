/// An HTTP-style failure from a simulated server.
public struct ServiceError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The HTTP status code.
  public var code: Int
  /// The HTTP reason phrase.
  public var reason: String
  /// The path that was asked for.
  public var path: String

  public init(code: Int, reason: String, path: String) {
    self.code = code
    self.reason = reason
    self.path = path
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
    var slowPaths: [String: Duration] = [:]
    var log: [String] = []
  }

  /// The server's name, for messages.
  public let name: String
  private let state: Locked<State>

  public init(name: String, latency: Duration) {
    self.name = name
    state = Locked(State(latency: latency))
  }

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

  /// Answers a request for `path`: waits for the latency, fails during an outage, and otherwise
  /// returns what `answer` returns (or throws).
  public func respond<T: Sendable>(to path: String, _ answer: () throws -> T) async throws -> T {
    let (latency, extra) = state.withLock { state in
      state.log.append(path)
      let extra = state.slowPaths.first { path.contains($0.key) }?.value ?? .zero
      return (state.latency, extra)
    }
    try await Task.sleep(for: latency + extra)
    if isDown { throw ServiceError.unavailable(path) }
    return try answer()
  }
}
