import ExampleServer
import ExampleServices
import Foundation
import Testing

/// The thumbnail service over HTTP, as the Thumbnails playground stages it: held requests, a new
/// revision uploaded mid-way, an outage, and a held request whose client goes away. The log the
/// client follows is the server's.
@Suite("Thumbnails over HTTP", .timeLimit(.minutes(1)))
struct ThumbnailsOverHTTPTests {
  static let items = ThumbnailCatalog.redlands()

  @Test func aHeldRequestAnswersTheRevisionItFoundOnArrivalOnceReleased() async throws {
    try await withThumbnails { _, service, changes in
      let item = Self.items[0]
      service.holdNextRequest(for: item.id)
      let slow = Task { try await service.thumbnail(for: item.id) }
      await changes.wait(service) { $0.heldItemIDs == [item.id] }
      let uploaded = try await service.uploadNewThumbnail(for: item.id)
      #expect(uploaded == item.revision + 1)
      try await service.answerHeldRequests()
      #expect(try await slow.value == Thumbnail(itemID: item.id, revision: item.revision), "the revision when it arrived")
      #expect(try await service.thumbnail(for: item.id) == Thumbnail(itemID: item.id, revision: uploaded))
      let log = await changes.wait(service) { $0.counts.answered == 2 }
      #expect(log.requests.map(\.outcome) == [
        .answered(revision: item.revision, order: 1), .answered(revision: uploaded, order: 2),
      ])
      #expect(service.logIsCurrent)
    }
  }

  @Test func aHeldRequestWhoseTaskIsCancelledEndsCancelledAndTheServerSeesTheClientGo() async throws {
    try await withThumbnails { server, service, changes in
      service.holdRequests()
      let item = Self.items[1]
      let request = Task { try await service.thumbnail(for: item.id) }
      await changes.wait(service) { $0.heldItemIDs == [item.id] }
      request.cancel()
      await #expect(throws: CancellationError.self) { try await request.value }
      let log = await changes.wait(service) { $0.counts.cancelled == 1 }
      #expect(log.held.isEmpty)
      let entries = await server.log.waitForOutcomes(containing: "thumbnail.png")
      #expect(entries.map(\.outcome) == [.clientWentAway])
    }
  }

  @Test func anOutageFailsTheRequestAfterTheServiceLoggedIt() async throws {
    try await withThumbnails { _, service, changes in
      service.server.isDown = true
      await #expect(throws: ServiceError.self) { try await service.thumbnail(for: Self.items[2].id) }
      let log = await changes.wait(service) { $0.counts.failed == 1 }
      #expect(log.requests.map(\.outcome) == [.failed("503 Service Unavailable")])
      #expect(service.logIsCurrent)
    }
  }

  @Test func resetStartsAgainFromTheFirstRevisions() async throws {
    try await withServer { _, url in
      let first = try await ThumbnailClient(baseURL: url, latency: .zero, onChange: {})
      defer { first.stop() }
      let item = Self.items[3]
      #expect(try await first.uploadNewThumbnail(for: item.id) == item.revision + 1)
      _ = try await first.thumbnail(for: item.id)
      let second = try await ThumbnailClient(baseURL: url, latency: .zero, onChange: {})
      defer { second.stop() }
      #expect(second.log.requests.isEmpty)
      #expect(try await second.thumbnail(for: item.id).revision == item.revision)
    }
  }
}

/// Runs `body` with a server and a ``ThumbnailClient`` of it, whose changes `changes` hears of.
private func withThumbnails(
  _ body: @Sendable (ExampleServer, ThumbnailClient, LogChanges) async throws -> Void
) async throws {
  try await withServer { server, url in
    let changes = LogChanges()
    let service = try await ThumbnailClient(baseURL: url, latency: .zero, onChange: changes.signal)
    defer { service.stop() }
    try await body(server, service, changes)
  }
}

/// The changes of a ``ThumbnailClient``'s log, to wait for one.
private final class LogChanges: Sendable {
  private let stream: AsyncStream<Void>
  private let continuation: AsyncStream<Void>.Continuation

  init() {
    (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
  }

  func signal() { continuation.yield() }

  /// Waits until `condition` holds for `service`'s log (the suite's time limit bounds it).
  @discardableResult
  func wait(_ service: ThumbnailClient, until condition: (ThumbnailLog) -> Bool) async -> ThumbnailLog {
    var iterator = stream.makeAsyncIterator()
    while !condition(service.log) {
      guard await iterator.next() != nil else { break }
    }
    return service.log
  }
}
