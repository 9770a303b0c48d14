@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Chains 100,000 deep of the plainest kinds: loadables made from closures that load the link
/// before, and loadables that declare two dependencies. Each scenario runs in an exit test: a
/// recursion through the depth of the chain overflows the stack (SIGSEGV).
@Suite("Deep chains of plain loadables", .serialized, .timeLimit(.minutes(3)))
struct DeepPlainChainTests {
  /// ThreadSafety.md, Lifetimes: "Releasing the end of a chain of any length frees its links one
  /// after the other, not one inside the other". 199ee70 hands a `map`'s, an `asyncMap`'s and a
  /// `flatMap`'s transform to `DeferredRelease`, but not the operation of a loadable made from a
  /// closure (`AsyncLoadable { try await previous.load() + 1 }`, the plain way to build on another
  /// loadable): AsyncLoadable.deinit returns at once for a loadable without extras
  ///, and its operation — holding the link before — is destroyed with its
  /// stored properties, one `deinit` inside the other. 100,000 links overflow the stack.
  @Test func releasingAChainOfClosureLoadablesDoesNotRecurse() async {
    await #expect(processExitsWith: .success) {
      await Task.detached {
        var top = AsyncLoadable<Int>(content: 0)
        for _ in 0..<100_000 {
          let previous = top
          top = AsyncLoadable { () async throws -> Int in
            try await previous.load()
            return (previous.content ?? 0) + 1
          }
        }
        top = AsyncLoadable(content: 0)  // releases the whole chain
        #expect(top.content == 0)
      }.value
    }
  }

  /// 199ee70: "A failure that climbed a chain of attempts on tasks ... came out of each wait boxed
  /// in one more `any Error` (unoptimized builds), and a cast of the error of a chain 100,000 deep
  /// recursed through as many boxes: a stack overflow. A caller's wait now receives its outcome as
  /// a value (`Result`)". Only the `LoadContinuation` was changed: an attempt that declares two
  /// dependencies or more waits for them in `DependencyGroup.loadAll`, still a throwing
  /// continuation resumed by throwing. A failure up 100,000 such links
  /// (each declares the link before and a loaded table) is boxed once per level, and the cast
  /// overflows the stack, as before the fix.
  @Test func aFailureUpADeepChainOfAttemptsWithTwoDependenciesCanBeCast() async {
    await #expect(processExitsWith: .success) {
      let control = ControlledLoad<Int>()
      let table = AsyncLoadable(content: 0)
      var links: [AsyncLoadable<Int>] = [control.makeLoadable()]
      for _ in 0..<100_000 {
        let next = AsyncLoadable { 1 }
        next.addDependency(links.last!)
        next.addDependency(table)
        links.append(next)
      }
      let top = links.last!
      let load = Task { try await top.load() }
      do { try await control.waitForStart() } catch { Issue.record(error) }
      control.fail(Boom(code: 1))
      let error = await load.result.failure
      #expect(error is Boom)
      #expect(top.loadError is Boom)
    }
  }
}
