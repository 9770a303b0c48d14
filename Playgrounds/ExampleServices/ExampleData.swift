import Foundation

/// The JSON files that ship next to this source file, in `Data/`.
///
/// They are found from this file's path at build time (`#filePath`), so `swift run` works from a
/// fresh clone without bundling resources. They are read with `Data(contentsOf:)`: on Linux
/// `URLSession` cannot read `file://` URLs.
public enum ExampleData {
  /// The folder that holds the data files.
  public static let directory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .appendingPathComponent("Data", isDirectory: true)

  /// The URL of the data file `name`, such as `"Redlands.locator.json"`.
  public static func url(_ name: String) -> URL {
    directory.appendingPathComponent(name)
  }

  /// Reads and decodes the data file `name`.
  public static func decode<T: Decodable>(_ type: T.Type, from name: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(contentsOf: url(name)))
  }

  /// Like ``decode(_:from:)``, for the files the simulated servers are built from: a missing or
  /// malformed file there is a broken checkout, not a situation an example should handle.
  static func bundled<T: Decodable>(_ type: T.Type, from name: String) -> T {
    do {
      return try decode(type, from: name)
    } catch {
      fatalError("ExampleServices: cannot read \(url(name).path): \(error)")
    }
  }
}

/// The simulated services of the City of Redlands: a portal, a GIS server with map and feature
/// services, and a geocode server. Each one has its own ``SimulatedServer`` (latency, outages).
public final class RedlandsServices: Sendable {
  public let portal: PortalService
  public let gis: GISServer
  public let geocoder: GeocodeServer

  /// Creates the services with `latency` on every request.
  ///
  /// With `server`, the URL of an `example-server` (the `Server/` package), every request goes
  /// over HTTP through `URLSession`, with the same latency and outages; without it, the services
  /// answer in-process.
  public init(latency: Duration = RedlandsServices.defaultLatency, server: URL? = nil) {
    let client = server.map { HTTPClient(baseURL: $0) }
    portal = PortalService(server: SimulatedServer(name: "portal", latency: latency, remote: client, prefix: "/portal"))
    gis = GISServer(server: SimulatedServer(name: "GIS server", latency: latency, remote: client, prefix: "/gis/"))
    geocoder = GeocodeServer(
      server: SimulatedServer(name: "geocode server", latency: latency, remote: client, prefix: "/geocode"))
  }

  /// The URL after `--server` on the command line, or `nil` without one: `swift run MapViewer
  /// --server http://127.0.0.1:8080` runs a playground against the `example-server`.
  ///
  /// When there is one, it says so on standard error, so the standard output stays the same
  /// both ways. It first checks that something answers HTTP there (`GET /admin/ping`); if
  /// nothing does, it prints `cannot reach the server at URL: …` and exits with status 69
  /// (`EX_UNAVAILABLE`), before the playground starts its story.
  public static let commandLineServer: URL? = {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: "--server") else { return nil }
    guard index + 1 < arguments.count, let url = URL(string: arguments[index + 1]), url.scheme?.hasPrefix("http") == true
    else {
      FileHandle.standardError.write(Data("--server takes a URL such as http://127.0.0.1:8080\n".utf8))
      exit(64)
    }
    if let failure = HTTPClient.ping(url) { exitCannotReach(url, failure) }
    FileHandle.standardError.write(Data("(services over HTTP from \(url))\n".utf8))
    return url
  }()

  /// 2 ms, or the number of milliseconds in the `LATENCY_MS` environment variable
  /// (`LATENCY_MS=300 swift run MapViewer` to watch things load slowly).
  public static var defaultLatency: Duration {
    let text = ProcessInfo.processInfo.environment["LATENCY_MS"] ?? ""
    return .milliseconds(Int(text).map { max(0, $0) } ?? 2)
  }
}

/// Prints `cannot reach the server at URL: error` on standard error and exits with status 69
/// (`EX_UNAVAILABLE`): what a playground does when its `--server` does not answer.
public func exitCannotReach(_ url: URL, _ error: any Error) -> Never {
  FileHandle.standardError.write(Data("cannot reach the server at \(url): \(describe(error))\n".utf8))
  exit(69)
}
