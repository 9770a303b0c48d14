import LoadableKit
import Testing

/// Every loadable has a readable name: given, its subclass's, or derived from its combinator.
@Suite(.timeLimit(.minutes(1))) struct LoadableNameTests {
  final class FeatureTable: AsyncLoadable<Int>, @unchecked Sendable {
    override func performLoad() async throws -> Int { 1 }
  }

  @Test func aNameGivenAtCreationWins() {
    #expect(AsyncLoadable(name: "portal") { 1 }.displayName == "portal")
    #expect(AsyncLoadable(name: "sync portal") { () throws -> Int in 1 }.displayName == "sync portal")
    #expect(AsyncLoadable(name: "constant", content: 1).displayName == "constant")
    #expect(AsyncLoadable(name: "portal") { 1 }.name == "portal")
    #expect(FeatureTable().named("parks table").displayName == "parks table")
  }

  @Test func unnamedLoadablesShowTheirTypeOrTheirCombinator() {
    let portal = AsyncLoadable(name: "portal") { [1, 2, 3] }
    #expect(FeatureTable().displayName == "FeatureTable")
    #expect(AsyncLoadable { 1 }.displayName == "AsyncLoadable<Int>")
    #expect(portal.map { $0.count }.displayName == "map(portal)")
    #expect(portal.asyncMap { $0.count }.displayName == "asyncMap(portal)")
    #expect(portal.flatMap { _ in AsyncLoadable { 1 } }.displayName == "flatMap(portal)")
    #expect(portal.joined { _ in AsyncLoadable { 1 } }.displayName == "joined(portal)")
    #expect(zip(portal, portal, portal).displayName == "zip(3)")
    #expect(zip([portal, portal]).displayName == "zip(2)")
    #expect(zip(portal, portal).map { $0.0 }.displayName == "map(zip(2))")
    #expect(FeatureTable().map { $0 }.displayName == "map(FeatureTable)")
    #expect(portal.map { $0 }.map { $0 }.displayName == "map(map(portal))")
    #expect(portal.map { $0 }.named("items").map { $0 }.displayName == "map(items)")
  }

  @Test func aDerivedNameStaysShortOnALongChain() {
    var chain = AsyncLoadable(name: "root") { 0 }
    for _ in 0..<10_000 { chain = chain.map { $0 + 1 } }
    #expect(chain.displayName == "map(map(map(…)))")
  }

  @Test func theTreeDumpUsesTheNames() async throws {
    let portal = AsyncLoadable(name: "portal") { [1, 2, 3] }
    let count = portal.map { $0.count }
    try await count.load()
    #expect(count.dependencyTree(showingDurations: false) == """
      map(portal) [loaded]
      └─ portal [loaded]
      """)
  }

  @Test func aDependencyCycleNamesTheLoadables() async throws {
    let a = AsyncLoadable<Int>(name: "layer a") { 1 }
    let b = AsyncLoadable<Int>(name: "layer b") { 2 }
    a.addDependency(b)
    b.addDependency(a)
    let error = await #expect(throws: LoadableError.self) { try await a.load() }
    #expect(error == .dependencyCycle)
    #expect(error?.message.contains("layer") == true)
    #expect(error?.message.contains("AsyncLoadable<Int>") == false)
  }
}
