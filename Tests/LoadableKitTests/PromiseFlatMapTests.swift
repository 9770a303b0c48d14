@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a `flatMap` goes stale when its inner loadable changes.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

@Suite("Promises: a flatMap goes stale with its inner loadable", .timeLimit(.minutes(1)))
struct PromiseFlatMapTests {

  /// The loadable a `flatMap` (or `joined`) transform returned changes its content: the derived
  /// loadable is stale (`needsSync`) until it loads again (SPEC §2), and then has the new content.
  @Test(arguments: [false, true])
  func aFlatMapGoesStaleWhenItsInnerLoadableChanges(joined: Bool) async throws {
    let control = ControlledLoad<Int>()
    let inner = control.makeLoadable()
    let source = AsyncLoadable<Int>(content: 1)
    if joined {
      try await Self.checkStaleness(of: source.joined { _ in inner }, inner: inner, control: control) { $0.1 }
    } else {
      try await Self.checkStaleness(of: source.flatMap { _ in inner }, inner: inner, control: control) { $0 }
    }
  }

  private static func checkStaleness<T: Sendable>(
    of derived: AsyncLoadable<T>, inner: AsyncLoadable<Int>, control: ControlledLoad<Int>,
    value: @escaping @Sendable (T) -> Int
  ) async throws {
    async let first = derived.fetch()
    try await control.waitForStart(1)
    control.resolve(10)
    #expect(value(try await first) == 10)
    #expect(!derived.needsSync)

    async let refreshed = inner.fetch()
    try await control.waitForStart(2)
    control.resolve(20)
    #expect(try await refreshed == 20)
    #expect(derived.needsSync)
    #expect(derived.content.map(value) == 10)

    #expect(value(try await derived.fetchIfNeeded()) == 20)  // the inner one is up to date: no new load
    #expect(!derived.needsSync)
    #expect(control.startCount == 2)
  }
}
