@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// status delivery in order when an observer calls back in.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

@Suite("Promises: observers see every status in order", .timeLimit(.minutes(1)))
struct PromiseObserverOrderTests {

  /// Observer A cancels the load when it first hears `.loading`; observer B, and a status stream,
  /// must see every status once, in the order the changes happened, although A's call changes the
  /// status before B has heard the change before it.
  @Test func anObserverThatCallsBackInDoesNotReorderTheOthers() async throws {
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    let seenByA = Recorder<LoadStatus>()
    let seenByB = Recorder<LoadStatus>()
    let cancels = Counter()
    let a = loadable.observeLoadStatus { status in
      seenByA.append(status)
      if status == .loading && cancels.increment() == 1 { loadable.cancelLoad() }
    }
    let b = loadable.observeLoadStatus { status in seenByB.append(status) }
    let stream = loadable.loadStatusUpdates(bufferingPolicy: .unbounded)
    loadable.sync()  // A cancels it from its handler
    #expect(loadable.loadStatus == .failed)
    loadable.sync()  // this one loads
    try await control.waitForStart()
    control.resolve(5)
    await eventually { seenByB.count >= 5 && seenByA.count >= 5 }
    let expected: [LoadStatus] = [.notLoaded, .loading, .failed, .loading, .loaded]
    #expect(seenByA.values == expected)
    #expect(seenByB.values == expected)
    var streamed: [LoadStatus] = []
    for await status in stream {
      streamed.append(status)
      if streamed.count == expected.count { break }
    }
    #expect(streamed == expected)
    #expect(loadable.content == 5)
    a.cancel()
    b.cancel()
  }

  /// Observer A starts a load when it hears `.notLoaded` and adds observer B from its handler:
  /// B hears the `.loading` that was current when it was added once, not also the change queued
  /// before it came for the observers that were there then.
  @Test func anObserverAddedWhileAChangeIsQueuedHearsItOnce() async throws {
    let control = ControlledLoad<Int>()
    let loadable = control.makeLoadable()
    let seenByB = Recorder<LoadStatus>()
    let observations = Mutex<[LoadObservation]>([])
    let a = loadable.observeLoadStatus { status in
      guard status == .notLoaded else { return }
      loadable.sync()  // `.loading` is queued for A, the only observer
      let b = loadable.observeLoadStatus { status in seenByB.append(status) }
      observations.withLock { $0.append(b) }
    }
    #expect(seenByB.values == [.loading])
    try await control.waitForStart()
    control.resolve(5)
    await eventually { seenByB.count >= 2 }
    #expect(seenByB.values == [.loading, .loaded])
    a.cancel()
    for observation in observations.withLock({ $0 }) { observation.cancel() }
  }
}
