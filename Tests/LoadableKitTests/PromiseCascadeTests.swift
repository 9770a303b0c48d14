@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// a cascade cancel spares an attempt that `sync()` also wanted.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

/// The ways a dependent's attempt can start a dependency's attempt.
enum PromiseDependentKind: String, Sendable, CaseIterable, CustomStringConvertible {
  /// `asyncMap`: an attempt on a task, loading its source.
  case asyncMap
  /// `map`: an attempt without a task, driven by its source's delivery.
  case map
  /// A declared required dependency of a closure loadable.
  case declared

  var description: String { rawValue }

  func dependent(on dependency: AsyncLoadable<Int>) -> AsyncLoadable<Int> {
    switch self {
    case .asyncMap:
      return dependency.asyncMap { $0 + 1 }
    case .map:
      return dependency.map { $0 + 1 }
    case .declared:
      let dependent = AsyncLoadable<Int> { 0 }
      dependent.addDependency(dependency, kind: .required)
      return dependent
    }
  }
}

@Suite("Promises: a cascade cancel spares what others want", .timeLimit(.minutes(1)))
struct PromiseCascadeTests {

  /// A dependent starts its dependency's attempt; then `sync()` on the dependency asks for that
  /// same attempt. Cancelling the dependent must not cancel it: somebody else wants it (SPEC §2).
  @Test(arguments: PromiseDependentKind.allCases)
  func aCascadeCancelSparesAnAttemptThatSyncAlsoWanted(_ kind: PromiseDependentKind) async throws {
    let control = ControlledLoad<Int>()
    let dependency = control.makeLoadable()
    let dependent = kind.dependent(on: dependency)
    let loading = Task { try await dependent.load() }
    try await control.waitForStart()  // the dependent's attempt started the dependency's
    dependency.sync()  // joins the running attempt: now it is wanted
    dependent.cancelLoad()
    await #expect(throws: CancellationError.self) { try await loading.value }
    #expect(dependent.loadStatus == .failed)
    // The cascade left the dependency's attempt running.
    #expect(dependency.loadStatus == .loading)
    #expect(control.cancelledCount == 0)
    #expect(control.pendingCount == 1)
    control.resolve(7)
    await eventually { dependency.loadStatus == .loaded }
    #expect(dependency.content == 7)
    #expect(control.startCount == 1)
  }
}
