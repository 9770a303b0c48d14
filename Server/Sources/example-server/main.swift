// example-server: the playgrounds' example services over HTTP.
//
//     swift run --package-path Server example-server --port 8080
//     swift run --package-path Server example-server --port 0     # picks a free port
//
// Prints `listening on http://127.0.0.1:<port>` once it listens, then one line per request with
// its outcome. Exits with status 2 and a clear message when the port is taken.
import ExampleServer
import Foundation

func option(_ name: String) -> String? {
  let arguments = CommandLine.arguments
  guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
  return arguments[index + 1]
}

guard let port = Int(option("--port") ?? "8080"), (0...65_535).contains(port) else {
  FileHandle.standardError.write(Data("example-server: --port takes a number from 0 to 65535\n".utf8))
  exit(64)
}
let host = option("--host") ?? "127.0.0.1"
let server = ExampleServer(log: RequestLog(printsEntries: true))
let app = server.application(host: host, port: port) { port in
  FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
}
do {
  try await app.runService()
} catch {
  let text = "\(error)"
  if text.contains("Address already in use") || text.contains("EADDRINUSE") || text.contains("errno: 98") {
    FileHandle.standardError.write(Data("example-server: port \(port) on \(host) is taken; choose another with --port, or --port 0 for a free one\n".utf8))
    exit(2)
  }
  FileHandle.standardError.write(Data("example-server: \(error)\n".utf8))
  exit(1)
}
