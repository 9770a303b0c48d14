@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25 ("A suite that fails when a promise breaks"):
// two claim handlers see the same order when one of them refreshes.
// Seen failing with a quiet bug planted in the library (the commit that added it says which),
// and passing once the bug was taken out.

@Suite("Promises: claim handlers see changes in order", .timeLimit(.minutes(1)))
struct PromiseClaimOrderTests {

  /// Two claims of a key; the first of their handlers to hear the key loaded refreshes it from
  /// inside the call (which handler is called first is not specified, so either may). Both must
  /// see the same snapshots, each in the order the changes happened.
  @Test func twoClaimHandlersSeeTheSameOrderWhenOneRefreshes() async throws {
    let control = ControlledLoad<Int>()
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { _ in
      let value = try await control.operation()
      return (value, value)
    }
    let seenByA = Recorder<String>()
    let seenByB = Recorder<String>()
    let refreshes = Counter()
    @Sendable func handler(recordingInto seen: Recorder<String>) -> @Sendable (ContentLoader<Int, Int, Int>.Snapshot) -> Void {
      { snapshot in
        seen.append("\(snapshot.status) \(snapshot.value.map(String.init) ?? "-")")
        if snapshot.status == .loaded && refreshes.increment() == 1 { loader.refresh(1) }
      }
    }
    let a = loader.begin(1, onUpdate: handler(recordingInto: seenByA))
    let b = loader.begin(1, onUpdate: handler(recordingInto: seenByB))
    try await control.waitForStart(1)
    control.resolve(1)
    try await control.waitForStart(2)  // the handler's refresh
    control.resolve(2)
    await eventually { seenByA.values.last == "loaded 2" && seenByB.values.last == "loaded 2" }
    let expected = ["loading -", "loaded 1", "loading 1", "loaded 2"]
    #expect(seenByA.values == expected)
    #expect(seenByB.values == expected)
    #expect(refreshes.count == 4)  // each handler heard both loads; only the first call refreshed
    a.end()
    b.end()
  }

  /// The one order of effects holds for what the loader decides, too: a local write answers the
  /// callers waiting on the key's loading, and the key's claims are told of the written value
  /// before any of those callers is resumed (a completion handler runs inside the write).
  @Test func aCallerThatAWriteAnswersFindsTheClaimsToldFirst() async throws {
    let control = ControlledLoad<Int>()
    let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil) { _ in
      let value = try await control.operation()
      return (value, value)
    }
    let order = Recorder<String>()
    let claim = loader.begin(1) { snapshot in
      order.append("claim \(snapshot.status) \(snapshot.value.map(String.init) ?? "-")")
    }
    try await control.waitForStart(1)
    loader.loadable(for: 1).load { error in order.append(error == nil ? "caller answered" : "caller failed") }
    loader.set(7, version: 7, for: 1)
    #expect(order.values == ["claim loading -", "claim loaded 7", "caller answered"])
    claim.end()
  }
}
