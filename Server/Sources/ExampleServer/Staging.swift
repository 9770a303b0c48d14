import ExampleServices
import HTTPTypes

/// How the server answers: latency, outages and faults, set for every request by the admin
/// endpoint, or for one request by its headers.
///
/// Request headers (each optional):
/// - `X-Latency-Ms: 300`: wait 300 ms before answering.
/// - `X-Status: 503`: answer with this status instead (after the latency).
/// - `X-Retry-After: 1`: with a `503` or `429`, send `Retry-After: 1`.
/// - `X-Fault: cut-off` closes the connection half-way through the body; `X-Fault: malformed-json`
///   answers `200` with a body that is not JSON.
/// - `X-Hold: <tag>`: hold the request (after the latency) until `POST /admin/release?tag=<tag>`;
///   a request that arrives after its tag was released goes on at once. The thumbnail service
///   holds its requests itself, once it has read the revision to answer with, until
///   `POST /admin/thumbnails/release` (see `ThumbnailRoutes`).
///
/// The admin endpoint sets the same for every request of one service (`portal`, `gis`, `gp`,
/// `geocode`, or `all`): `POST /admin/staging?service=portal&down=true&retryAfter=1&latencyMs=300`,
/// and `POST /admin/staging?service=all` clears it.
public struct Staging: Sendable, Hashable {
  /// Faults a request can ask for.
  public enum Fault: String, Sendable, Hashable {
    case cutOff = "cut-off"
    case malformedJSON = "malformed-json"
  }

  public var latency: Duration = .zero
  /// A status to answer with instead of the real answer.
  public var status: Int?
  /// The `Retry-After` to send with a `503` or `429`, in seconds.
  public var retryAfterSeconds: Int?
  public var fault: Fault?
  /// The tag the request is held under until it is released, if it is held.
  public var hold: String?

  public init(
    latency: Duration = .zero, status: Int? = nil, retryAfterSeconds: Int? = nil, fault: Fault? = nil, hold: String? = nil
  ) {
    self.latency = latency
    self.status = status
    self.retryAfterSeconds = retryAfterSeconds
    self.fault = fault
    self.hold = hold
  }

  static let latencyHeader = HTTPField.Name("X-Latency-Ms")!
  static let statusHeader = HTTPField.Name("X-Status")!
  static let retryAfterHeader = HTTPField.Name("X-Retry-After")!
  static let faultHeader = HTTPField.Name("X-Fault")!
  static let holdHeader = HTTPField.Name("X-Hold")!

  /// This staging, with what `headers` set for one request.
  func overridden(by headers: HTTPFields) -> Staging {
    var staging = self
    if let text = headers[Self.latencyHeader], let milliseconds = Int(text) {
      staging.latency = .milliseconds(max(0, milliseconds))
    }
    if let text = headers[Self.statusHeader], let status = Int(text), (100..<600).contains(status) {
      staging.status = status
    }
    if let text = headers[Self.retryAfterHeader], let seconds = Int(text) { staging.retryAfterSeconds = max(0, seconds) }
    if let text = headers[Self.faultHeader] { staging.fault = Fault(rawValue: text) }
    if let tag = headers[Self.holdHeader], !tag.isEmpty { staging.hold = tag }
    return staging
  }
}

/// The staging of each service, set by the admin endpoint.
final class StagingTable: Sendable {
  private let table = Locked<[String: Staging]>([:])

  func staging(for service: String) -> Staging {
    table.withLock { $0[service] ?? $0["all"] ?? Staging() }
  }

  func set(_ staging: Staging?, for service: String) {
    table.withLock { table in
      if service == "all" { table = [:] }
      table[service] = staging
    }
  }
}
