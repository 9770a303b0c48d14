import LoadableKit
import Testing

/// Continuations resumed before their task suspended: an attempt on another thread that ends
/// while the caller is still inside `withUnsafeContinuation`'s closure. The runtime orders the
/// two threads without telling ThreadSanitizer (swiftlang/swift#57803), so the library hands each
/// such resume over visibly (`ContinuationHandoff`). These tests make the window as wide as they
/// can — attempts that end at once, callers that start them and join them, a slot of the load
/// limit handed from one key to the next — and mean something under `--sanitize=thread` (the CI
/// step), where each reported a race in one run out of two before the handoff; without the
/// sanitizer they check the answers only.
@Suite("Continuations resumed before their task suspends", .timeLimit(.minutes(1)))
struct EarlyResumeTests {
  @Test func fastAttemptsAnswerTheCallersThatStartedThem() async throws {
    for round in 0..<500 {
      let loadable = AsyncLoadable { round }
      #expect(try await loadable.fetch() == round)
    }
  }

  @Test func fastAttemptsAnswerCallersThatJoinedThem() async throws {
    for round in 0..<200 {
      let loadable = AsyncLoadable { round }
      let values = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<4 { group.addTask { try await loadable.fetch() } }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(values == Array(repeating: round, count: 4))
    }
  }

  @Test func aSlotOfTheLoadLimitIsHandedOnFromKeyToKey() async throws {
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil, maximumConcurrentLoads: 1) { key in (key, 1) }
    let values = try await withThrowingTaskGroup(of: Int.self) { group in
      for key in 0..<200 { group.addTask { try await loader.loadable(for: key).fetch() } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(values.sorted() == Array(0..<200))
  }
}
