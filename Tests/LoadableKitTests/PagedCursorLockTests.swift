@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A cursor whose `==` and `hash(into:)` — the app's code — read the paged loadable it is a cursor
/// of: its status and its pages' statuses, which take the loadable's locks. Compared or hashed
/// under one of them, it stops the process with "Recursive call to lock Mutex".
struct ReadingCursor: Hashable, Sendable {
  let number: Int

  /// The paged loadable the cursors read.
  static let paged = WeakHolder<PagedLoadable<ReadingCursor, Int>>()
  /// How many times a cursor was compared or hashed: the scenario's check that it read at all.
  static let reads = Counter()

  static func readLoadable() {
    if let paged = paged.object {
      _ = paged.loadStatus
      _ = paged.nextPageStatus
      _ = paged.previousPageStatus
    }
    reads.increment()
  }

  static func == (lhs: ReadingCursor, rhs: ReadingCursor) -> Bool {
    readLoadable()
    return lhs.number == rhs.number
  }

  func hash(into hasher: inout Hasher) {
    Self.readLoadable()
    hasher.combine(number)
  }
}

/// A paged loadable compares and hashes cursors outside its locks: the cursor is the app's type.
@Suite("Paged loadable: cursors outside the locks", .serialized, .timeLimit(.minutes(2)))
struct PagedCursorLockTests {
  /// Every step that compares or hashes a cursor: a next page landing (it borders the last page; it
  /// is remembered against loops), a failed next page asked for again (the slot's load is for that
  /// cursor), the bound dropping a page at either end, and a previous page landing.
  @Test func cursorsAreComparedAndHashedOutsideTheLocks() async {
    await #expect(processExitsWith: .success) {
      let control = ControlledLoad<Page<ReadingCursor, Int>>()
      let paged = PagedLoadable<ReadingCursor, Int>(maximumPages: 2) { _ in try await control.operation() }
      ReadingCursor.paged.set(paged)
      func page(_ number: Int) -> Page<ReadingCursor, Int> {
        Page(items: [number], nextCursor: ReadingCursor(number: number + 1))
      }
      func settle(_ attempt: Int, with result: Result<Page<ReadingCursor, Int>, Boom>, _ call: @escaping @Sendable () async throws -> Void) async throws -> Result<Void, any Error> {
        let task = Task { try await call() }
        try await control.waitForStart(attempt)
        switch result {
        case .success(let page): control.resolve(page)
        case .failure(let error): control.fail(error)
        }
        return await task.result
      }
      do {
        _ = try await settle(1, with: .success(page(0))) { try await paged.load() }
        _ = try await settle(2, with: .success(page(1))) { try await paged.loadNextPage() }  // lands
        _ = try await settle(3, with: .failure(Boom(code: 2))) { try await paged.loadNextPage() }  // fails
        // The failure sticks: the slot's load is for this cursor.
        let again = await Task { try await paged.loadNextPage() }.result
        #expect(throws: Boom(code: 2)) { try again.get() }
        _ = try await settle(4, with: .success(page(2))) { try await paged.retryNextPage() }  // drops page 0
        _ = try await settle(5, with: .success(page(0))) { try await paged.loadPreviousPage() }  // drops page 2
        #expect(paged.items == [0, 1])
        #expect(ReadingCursor.reads.count > 0)
      } catch {
        Issue.record(error)
      }
    }
  }
}
