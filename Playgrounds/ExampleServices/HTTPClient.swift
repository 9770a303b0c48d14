import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A failure of the network itself, not an answer of the server: the connection was lost or
/// refused, or the answer could not be read.
///
/// Errors are a struct with stable codes, so a new kind of failure is not a breaking change.
public struct NetworkError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What kind of failure.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    /// The connection closed before the whole answer arrived.
    public static let connectionLost = Code(name: "connection lost")
    /// Nobody answered at the address: no server, or the port is closed.
    public static let cannotConnect = Code(name: "cannot connect")
    /// The answer arrived but is not what the service sends (such as malformed JSON).
    public static let malformedResponse = Code(name: "malformed response")
    /// The request timed out in the URL session.
    public static let timedOut = Code(name: "timed out")
    /// Any other failure of the URL loading system.
    public static let other = Code(name: "network error")
    public var description: String { name }
  }

  public var code: Code
  /// The path that was asked for.
  public var path: String
  /// What happened, in words.
  public var message: String

  public init(code: Code, path: String, message: String) {
    self.code = code
    self.path = path
    self.message = message
  }

  public var description: String { "\(code): \(message)" }
}

/// A small HTTP client for the example services, on `URLSession` (FoundationNetworking on Linux).
///
/// Cancellation reaches the socket: cancelling the Swift task that waits in ``get(_:query:headers:)``
/// cancels the URL session's task, which closes the connection, so the server sees the client go
/// and sends nothing more. `URLSession` reports that as `URLError(.cancelled)`; this client throws
/// Swift's `CancellationError` instead, which is what LoadableKit's rules (a cancelled load fails
/// with `CancellationError`) and the default ``LoadableKit/RetryPolicy`` (never retry a
/// cancellation) expect.
///
/// An answer other than `2xx` throws ``ServiceError`` with the status, and with the delay of its
/// `Retry-After` header (in seconds), so a retry policy waits as long as the server asked. A lost
/// connection or an unreadable answer throws ``NetworkError``.
public final class HTTPClient: Sendable {
  /// The URL the paths are relative to.
  public let baseURL: URL
  private let session: URLSession

  /// Creates a client for the server at `baseURL`, with a session of its own that opens at most
  /// `maximumConnections` connections to it at once (`nil`: the URL session's default; further
  /// requests wait for a connection).
  public init(baseURL: URL, maximumConnections: Int? = nil) {
    self.baseURL = baseURL
    let configuration = URLSessionConfiguration.ephemeral
    if let maximumConnections { configuration.httpMaximumConnectionsPerHost = maximumConnections }
    configuration.timeoutIntervalForRequest = 3600  // the loadable's own timeout decides
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil  // see dataCancellingSafely(for:)
    session = URLSession(configuration: configuration)
  }

  deinit {
    session.finishTasksAndInvalidate()
  }

  /// `GET path?query` with `headers`: the body of a `2xx` answer.
  ///
  /// - Throws: `CancellationError` when the calling task is cancelled (the request is cancelled
  ///   on the wire); ``ServiceError`` for an answer other than `2xx`; ``NetworkError`` when the
  ///   connection fails.
  public func get(_ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:]) async throws -> Data {
    let (data, http) = try await send("GET", path, query: query, headers: headers)
    guard (200..<300).contains(http.statusCode) else { throw Self.serviceError(http, path: path) }
    return data
  }

  /// Sends `method path?query` with `headers`, and returns the answer whatever its status.
  ///
  /// - Throws: `CancellationError` when the calling task is cancelled (the request is cancelled
  ///   on the wire); ``NetworkError`` when the connection fails.
  public func send(
    _ method: String, _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:]
  ) async throws -> (Data, HTTPURLResponse) {
    var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
    components.percentEncodedPath = components.percentEncodedPath.trimmingSuffix("/")
      + (path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path)
    if !query.isEmpty { components.queryItems = query }
    guard let url = components.url else {
      throw NetworkError(code: .other, path: path, message: "not a valid URL: \(baseURL) + \(path)")
    }
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    try Task.checkCancellation()
    let data: Data
    let response: URLResponse
    do {
      (data, response) = try await dataCancellingSafely(for: request)
    } catch let error as URLError {
      throw Self.translate(error, path: path)
    }
    guard let http = response as? HTTPURLResponse else {
      throw NetworkError(code: .malformedResponse, path: path, message: "not an HTTP answer")
    }
    return (data, http)
  }

  /// `session.data(for:)`, with a cancellation that cannot deadlock.
  ///
  /// On this toolchain's FoundationNetworking (Linux), the async `data(for:)` cancels its
  /// `URLSessionTask` from inside the task's cancellation handler, which the runtime runs while it
  /// holds the cancelled task's status lock; `URLSessionTask.cancel()` then waits for the
  /// session's work queue. A response completing at that moment holds the work queue and waits
  /// for the same status lock to resume the caller: both wait for good
  /// (swift-corelibs-foundation#5412, fixed upstream by #5417; seen here as a hung test run).
  ///
  /// Here the cancellation handler only marks the request cancelled and hands the data task's
  /// `cancel()` to the session's delegate queue, so it never waits while the runtime holds the
  /// lock; there it cancels only while no answer was delivered. The request still stops on the
  /// wire: the server sees the client go (the tests over loopback check it).
  ///
  /// The session has no URL cache, which closes a second race: with one, FoundationNetworking
  /// reads the cache before the data task has its protocol, and a cancel in that window reports
  /// its failure after the task left the session's registry, which traps ("a task that in not
  /// in the registry"). Cancelling 2,000 requests around their answers trapped in one run in four
  /// with the cache and in none of 60 without it (the Server package's tests run it).
  private func dataCancellingSafely(for request: URLRequest) async throws -> (Data, URLResponse) {
    let pending = Locked<(task: URLSessionDataTask?, cancelled: Bool, answered: Bool)>((nil, false, false))
    let session = session
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
        let task = session.dataTask(with: request) { data, response, error in
          pending.withLock { $0.answered = true }
          if let error {
            continuation.resume(throwing: error)
          } else if let response {
            continuation.resume(returning: (data ?? Data(), response))
          } else {
            continuation.resume(throwing: URLError(.badServerResponse))
          }
        }
        let cancelled = pending.withLock { pending in
          pending.task = task
          return pending.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }  // not in the cancellation handler: no lock is held here
      }
    } onCancel: {
      let task = pending.withLock { pending in
        pending.cancelled = true
        return pending.task
      }
      // On the queue that delivers the answer, and only while none was delivered.
      if let task {
        session.delegateQueue.addOperation {
          if !pending.withLock({ $0.answered }) { task.cancel() }
        }
      }
    }
  }

  /// The ``ServiceError`` for an answer other than `2xx`, with the delay of its `Retry-After`.
  static func serviceError(_ http: HTTPURLResponse, path: String) -> ServiceError {
    let retryAfter = (http.value(forHTTPHeaderField: "Retry-After")).flatMap(Int.init).map { Duration.seconds($0) }
    return ServiceError(
      code: http.statusCode, reason: HTTPURLResponse.localizedString(forStatusCode: http.statusCode).capitalized,
      path: path, retryAfter: retryAfter)
  }

  /// Decodes `data`, the answer to `path`, as the JSON of `type`.
  ///
  /// - Throws: ``NetworkError`` with the code ``NetworkError/Code/malformedResponse`` when it is not.
  static func decode<T: Decodable>(_ type: T.Type, _ data: Data, path: String) throws -> T {
    do {
      return try JSONDecoder().decode(type, from: data)
    } catch {
      throw NetworkError(
        code: .malformedResponse, path: path, message: "the answer is not the JSON of \(type) (\(data.count) bytes)")
    }
  }

  /// `GET path?query` with `headers`, decoding the JSON answer as `type`.
  ///
  /// - Throws: What ``get(_:query:headers:)`` throws, and ``NetworkError`` with the code
  ///   ``NetworkError/Code/malformedResponse`` when the body is not the JSON of `type`.
  public func get<T: Decodable>(
    _ type: T.Type, _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:]
  ) async throws -> T {
    try Self.decode(type, try await get(path, query: query, headers: headers), path: path)
  }

  /// Asks `GET /admin/ping` of the server at `baseURL` and waits for an answer, blocking the
  /// calling thread (at most 10 s): `nil` when the server answered, whatever its status, or the
  /// ``NetworkError`` that says why nothing did.
  ///
  /// It is for a program's start-up, before anything else runs, where the playgrounds read
  /// `--server` synchronously (``RedlandsServices/commandLineServer``).
  static func ping(_ baseURL: URL) -> NetworkError? {
    let path = "/admin/ping"
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 10
    let session = URLSession(configuration: configuration)
    defer { session.invalidateAndCancel() }
    let outcome = Locked<NetworkError?>(nil)
    let answered = DispatchSemaphore(value: 0)
    session.dataTask(with: baseURL.appendingPathComponent("admin/ping")) { _, response, error in
      if response == nil {
        let failure =
          (error as? URLError).map { translate($0, path: path) as? NetworkError } ?? nil
          ?? NetworkError(code: .other, path: path, message: error.map { "\($0)" } ?? "no answer")
        outcome.withLock { $0 = failure }
      }
      answered.signal()
    }.resume()
    answered.wait()
    return outcome.withLock { $0 }
  }

  private static func translate(_ error: URLError, path: String) -> any Error {
    switch error.code {
    case .cancelled:
      // The only way this client's tasks are cancelled is their Swift task being cancelled.
      return CancellationError()
    case .networkConnectionLost, .cannotParseResponse, .badServerResponse,
      // FoundationNetworking on Linux reports a body cut short (curl's "partial file") as unknown.
      .unknown:
      return NetworkError(code: .connectionLost, path: path, message: "the connection closed before the whole answer arrived")
    case .cannotConnectToHost, .cannotFindHost, .notConnectedToInternet:
      return NetworkError(code: .cannotConnect, path: path, message: "nobody answers at the server's address")
    case .timedOut:
      return NetworkError(code: .timedOut, path: path, message: "the request timed out")
    default:
      return NetworkError(code: .other, path: path, message: "URLError \(error.code.rawValue)")
    }
  }
}

extension String {
  fileprivate func trimmingSuffix(_ suffix: String) -> String {
    hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
  }
}
