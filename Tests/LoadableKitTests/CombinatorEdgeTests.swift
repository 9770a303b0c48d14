@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Runs each job of the tasks the library starts at once, inline, on the thread that starts the
/// task: a task the library starts runs to its first suspension before the starting call goes on.
/// It lands a task's work in a window between two statements of one thread.
final class InlineTaskExecutor: TaskExecutor, @unchecked Sendable {
  func enqueue(_ job: consuming ExecutorJob) {
    UnownedJob(job).runSynchronously(on: asUnownedTaskExecutor())
  }
}

/// Combinators at the edges: a cancel that comes before the attempt's driver is attached, a
/// failure that climbs 100,000 attempts on tasks, a chain of `flatMap`s linked through their
/// transforms released at once.
@Suite("Combinators: early cancels, deep failures, deep releases", .timeLimit(.minutes(3)))
struct CombinatorEdgeTests {
  /// The interleaving behind a `CascadeInterestTests` test that failed once under ThreadSanitizer: the source's attempt ends, and
  /// its observer cancels the map, before the thread that started the map's attempt has attached
  /// the attempt's driver (the map's context). The state machine decides the cancel (the map
  /// fails, its caller throws), but nothing tells the context, whose wait for the source is then
  /// answered with the content: the transform runs for the cancelled attempt.
  @Test func aMapCancelledBeforeItsDriverIsAttachedDoesNotRunItsTransform() async throws {
    let source = AsyncLoadable { 1 }  // ends as soon as its task runs
    let transforms = Mutex(0)
    let view = source.map { value -> Int in
      transforms.withLock { $0 += 1 }
      return value * 10
    }
    let observation = source.observeLoadStatus { status in
      if status == .loaded { view.cancelLoad() }
    }
    defer { observation.cancel() }
    // The source's task runs inline, inside the map's call that starts it: before that call
    // attaches the map's driver.
    let executor = InlineTaskExecutor()
    await #expect(throws: CancellationError.self) {
      try await TaskLaunch.executor.withValue(executor) { try await view.load() }
    }
    #expect(source.content == 1)
    #expect(view.loadStatus == .failed)
    // The transform, if it runs, runs on a task started meanwhile (inline too).
    for _ in 0..<1000 { await Task.yield() }
    #expect(transforms.withLock { $0 } == 0, "the transform ran although the map ended cancelled")
  }

  /// The same for a `zip`: its driver (a dependency group) is attached after the sources answered.
  @Test func aZipCancelledBeforeItsDriverIsAttachedDoesNotRunItsCombination() async throws {
    let first = AsyncLoadable { 1 }
    let second = AsyncLoadable { 2 }
    let combined = Mutex(0)
    let view = zip(first, second).map { pair -> Int in
      combined.withLock { $0 += 1 }
      return pair.0 + pair.1
    }
    let observation = second.observeLoadStatus { status in
      if status == .loaded { view.cancelLoad() }
    }
    defer { observation.cancel() }
    let executor = InlineTaskExecutor()
    await #expect(throws: CancellationError.self) {
      try await TaskLaunch.executor.withValue(executor) { try await view.load() }
    }
    #expect(view.loadStatus == .failed)
    for _ in 0..<1000 { await Task.yield() }
    #expect(combined.withLock { $0 } == 0, "the transform ran although the view ended cancelled")
  }

  /// Releasing a chain of 100,000 `flatMap`s, each returning the link before it
  /// (`one.flatMap { _ in previous }`, the documented form of a transform that returns an existing
  /// loadable), recursed once per link: the transform's closure holds the next link, and
  /// it is destroyed with the `flatMap`'s stored properties, after the loop of `DeferredRelease`
  /// that releases the sources and the recorded inner loadable one after the other has run. The
  /// process died of a stack overflow (SIGSEGV).
  @Test func releasingAChainOfFlatMapsOverExistingLoadablesDoesNotRecurse() async {
    await Task.detached {
      let one = AsyncLoadable(content: 1)
      var top: AsyncLoadable<Int> = AsyncLoadable(content: 0)
      for _ in 0..<100_000 {
        let previous = top
        top = one.flatMap { _ in previous }
      }
      top = AsyncLoadable(content: 0)  // releases the whole chain
      #expect(top.content == 0)
    }.value
  }

  /// A failure that bubbles up a chain of 100,000 loadables that each declare the next
  /// as a required dependency (or of 100,000 `asyncMap`s) reaches the caller as an error that a
  /// cast can read. Each attempt on a task wrapped the error in one more `any Error` box
  /// (the throwing continuation's resume, unoptimized), and `error is Boom` recursed through
  /// 100,000 boxes in the runtime: the process died of a stack overflow (SIGSEGV).
  @Test(arguments: ["declared", "asyncMap"])
  func aFailureUpADeepChainOfAttemptsOnTasksCanBeCast(kind: String) async throws {
    let control = ControlledLoad<Int>()
    var links: [AsyncLoadable<Int>] = [control.makeLoadable()]
    for _ in 0..<100_000 {
      if kind == "asyncMap" {
        links.append(links.last!.asyncMap { $0 + 1 })
      } else {
        let next = AsyncLoadable { 1 }
        next.addDependency(links.last!)
        links.append(next)
      }
    }
    let top = links.last!
    let load = Task { try await top.load() }
    try await control.waitForStart()
    control.fail(Boom(code: 1))
    let error = await load.result.failure
    #expect(error is Boom)
    #expect(top.loadError is Boom)
  }
}
