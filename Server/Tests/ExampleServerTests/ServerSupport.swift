import ExampleServer
import ExampleServices
import Foundation
import Hummingbird

/// Runs an ``ExampleServer`` in-process on a free loopback port for the duration of `body`.
func withServer<R: Sendable>(
  _ body: @Sendable (ExampleServer, URL) async throws -> R
) async throws -> R {
  let server = ExampleServer()
  let (ports, portSource) = AsyncStream.makeStream(of: Int.self)
  let app = server.application(port: 0) { port in portSource.yield(port) }
  return try await withThrowingTaskGroup(of: R?.self) { group in
    group.addTask {
      try await app.run()
      return nil
    }
    defer { group.cancelAll() }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { throw CancellationError() }
    let url = URL(string: "http://127.0.0.1:\(port)")!
    let result = try await body(server, url)
    group.cancelAll()
    return result
  }
}

extension RequestLog {
  /// Waits until a request for a target containing `fragment` arrived, and returns its number.
  @discardableResult
  func waitForRequest(containing fragment: String, count: Int = 1) async -> [Entry] {
    await wait { $0.filter { $0.target.contains(fragment) }.count >= count }.filter { $0.target.contains(fragment) }
  }

  /// Waits until every request for a target containing `fragment` has an outcome.
  func waitForOutcomes(containing fragment: String, count: Int = 1) async -> [Entry] {
    await wait { entries in
      let matching = entries.filter { $0.target.contains(fragment) }
      return matching.count >= count && matching.allSatisfy { $0.outcome != nil }
    }.filter { $0.target.contains(fragment) }
  }
}
