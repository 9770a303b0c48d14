import ExampleServer
import ExampleServices
import Foundation
import Hummingbird
import ServiceLifecycle
import Testing

/// Runs an ``ExampleServer`` in-process on a free loopback port for the duration of `body`.
///
/// The server stops with a graceful shutdown, not by cancelling its task: cancelling Hummingbird's
/// serving task while an accepted connection is still queued traps in SwiftNIO ("Deinited
/// NIOAsyncWriter without calling finish()", apple/swift-nio#3481), which a client's last
/// connection meeting the end of a test did in about one run in thirty. A graceful shutdown stops
/// accepting, closes the idle connections and waits for the requests in progress; a test that
/// leaves one in progress for 5 s fails, and the server is cancelled.
func withServer<R: Sendable>(
  _ body: @Sendable (ExampleServer, URL) async throws -> R
) async throws -> R {
  let server = ExampleServer()
  let (ports, portSource) = AsyncStream.makeStream(of: Int.self)
  let app = server.application(port: 0) { port in portSource.yield(port) }
  var configuration = ServiceGroupConfiguration(services: [app], logger: app.logger)
  configuration.maximumGracefulShutdownDuration = .seconds(5)
  let services = ServiceGroup(configuration: configuration)
  return try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask {
      defer { portSource.finish() }  // a server that cannot start ends the wait for its port
      try await services.run()
    }
    var iterator = ports.makeAsyncIterator()
    let outcome: Result<R, any Error>
    if let port = await iterator.next() {
      do {
        outcome = .success(try await body(server, URL(string: "http://127.0.0.1:\(port)")!))
      } catch {
        outcome = .failure(error)
      }
    } else {
      outcome = .failure(CancellationError())
    }
    let stopping = ContinuousClock.now
    await services.triggerGracefulShutdown()
    try await group.waitForAll()
    if ContinuousClock.now - stopping >= .seconds(5) {
      Issue.record("a request was still in progress on the server 5 s after the test ended")
    }
    return try outcome.get()
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
