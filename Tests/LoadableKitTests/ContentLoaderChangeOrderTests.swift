@testable import LoadableKit
import LoadableKitTesting
import Observation
import Synchronization
import Testing

/// A key's changes reach its claims' trackers, handlers and the event stream one by one, also
/// when they come faster than the loader reads the key.
@Suite("ContentLoader: every change told", .timeLimit(.minutes(1)))
struct ContentLoaderChangeOrderTests {
  /// Claim.snapshot's doc: "Observable: withObservationTracking and SwiftUI see every change of
  /// the key while the claim is active, as its handlers and streams do." An interim value is such
  /// a change (the handler hears it, the snapshot shows it), but trackers are never told.
  @Test func trackingAClaimsSnapshotSeesAnInterimValue() async {
    let source = KeyedSource()
    let handles = Recorder<Loader.InterimValues>()
    let loader = Loader(
      idleTimeout: nil,
      load: { key, interim in
        handles.append(interim)
        return try await source.load(key)
      })
    let heard = Recorder<String>()
    let claim = loader.begin(1) { heard.append(describe($0)) }
    await source.waitForStarts(1)
    let changes = Counter()
    let seen = withObservationTracking { claim.snapshot } onChange: { changes.increment() }
    #expect(seen.status == .loading && seen.value == nil)
    #expect(handles.values[0].deliver("disk", version: 1))
    // Delivered before `deliver` returns (this thread drains): the handler heard it...
    #expect(heard.values.last == "loading disk 1")
    #expect(describe(claim.snapshot) == "loading disk 1")
    // ...the tracker did not.
    #expect(changes.count == 1, "withObservationTracking was not told of the interim value")
    source.resolve(1, "network", version: 2)
    await eventually { claim.snapshot.status == .loaded }
    claim.end()
  }

  /// ContentLoader.Event: "delivered in the order the changes happened, one per change, never
  /// merged"; Claim.updates / begin(_:onUpdate:): "the current one first, then one for every
  /// change, in order". A key's load that ended and was refreshed before the loader read the key
  /// (here: the refresh comes from an observer of the key's loadable, which runs before the
  /// loader's status hook — the same window another thread's refresh hits) was never reported:
  /// neither the events nor the claim's handler heard `loaded(1, one, 1)`.
  @Test func aResultRefreshedAtOnceIsStillReported() async {
    let key = await KeyOneActedOn(when: [.loaded]) { $0.refresh(1) }
    key.source.resolve(1, "one", version: 1)
    await key.source.waitForStarts(2)
    key.source.resolve(1, "two", version: 2)
    await eventually { key.heard.values.last == "loaded two 2" && key.told.values.last == "loaded(1, two, 2)" }
    #expect(
      key.told.values == ["loading(1)", "loaded(1, one, 1)", "loadingWithPriorValue(1, one, 1)", "loaded(1, two, 2)"])
    #expect(distinct(key.heard.values) == ["loading - -", "loaded one 1", "loading one 1", "loaded two 2"])
    key.end()
  }

  /// The same merge with a failure: a failed load retried before the loader read the key was
  /// taken for a supersede, and `failed(1, …)` reached neither the events nor the claim's handler.
  @Test func aFailureRetriedAtOnceIsStillReported() async {
    let key = await KeyOneActedOn(when: [.failed]) { $0.refresh(1) }
    key.source.fail(1, Boom(code: 1))
    await key.source.waitForStarts(2)
    key.source.resolve(1, "two", version: 2)
    await eventually { key.heard.values.last == "loaded two 2" && key.told.values.last == "loaded(1, two, 2)" }
    #expect(key.told.values == ["loading(1)", "failed(1, Boom(code: 1))", "loading(1)", "loaded(1, two, 2)"])
    #expect(distinct(key.heard.values) == ["loading - -", "failed - -", "loading - -", "loaded two 2"])
    key.end()
  }
}

/// Key 1 of a loader, claimed with a handler (what it hears, `heard`), the loader's events read
/// (`told`), and an observer of the key's loadable that acts on the loader once, when the key's
/// status first becomes one of `statuses`: before the loader's status hook reads the key.
final class KeyOneActedOn: Sendable {
  let source = KeyedSource()
  let loader: Loader
  let told = Recorder<String>()
  let heard = Recorder<String>()
  let claim: Loader.Claim
  private let reading: Task<Void, Never>
  private let observation: LoadObservation

  init(when statuses: Set<LoadStatus>, _ act: @escaping @Sendable (Loader) -> Void) async {
    let loader = makeLoader(source)
    self.loader = loader
    let events = loader.events(bufferingPolicy: .unbounded)
    reading = Task { [told] in for await event in events { told.append("\(event)") } }
    claim = loader.begin(1) { [heard] in heard.append(describe($0)) }
    await source.waitForStarts(1)
    let acted = Counter()
    observation = loader.loadable(for: 1).observeLoadStatus { status in
      if statuses.contains(status), acted.increment() == 1 { act(loader) }
    }
  }

  func end() {
    observation.cancel()
    claim.end()
    reading.cancel()
  }
}

/// A load's end followed at once by a local write or a removal (a second review of the fix above).
extension ContentLoaderChangeOrderTests {
  /// LoadingKeyedContent: "Two changes of one key that happen before the first is noticed ... are
  /// still told as two, the end first". A load that ended and a local write (`set(_:version:for:)`)
  /// made before the loader read the key — from an observer of the key's loadable, as above — were
  /// told as the write alone: `loaded(1, one, 1)` (or the failure) was never told, and the claim's
  /// handler never saw it.
  @Test(arguments: ["loaded", "failed"])
  func aLoadsEndFollowedAtOnceByAWriteIsStillReported(end: String) async {
    let key = await KeyOneActedOn(when: [.loaded, .failed]) { _ = $0.set("w", version: 5, for: 1) }
    if end == "loaded" { key.source.resolve(1, "one", version: 1) } else { key.source.fail(1, Boom(code: 1)) }
    await eventually { key.told.values.last == "loaded(1, w, 5)" }
    let ended = end == "loaded" ? "loaded(1, one, 1)" : "failed(1, Boom(code: 1))"
    #expect(key.told.values == ["loading(1)", ended, "loaded(1, w, 5)"], "\(key.told.values)")
    let shown = end == "loaded" ? "loaded one 1" : "failed - -"
    #expect(distinct(key.heard.values) == ["loading - -", shown, "loaded w 5"], "\(key.heard.values)")
    key.end()
  }

  /// The same for a removal (`remove(_:)`) made right after the load ended: the removal's fresh
  /// load was told (`loading(1)`), the end before it never was.
  @Test func aLoadsEndFollowedAtOnceByARemovalIsStillReported() async {
    let key = await KeyOneActedOn(when: [.loaded]) { $0.remove(1) }
    key.source.resolve(1, "one", version: 1)
    await key.source.waitForStarts(2)
    key.source.resolve(1, "two", version: 2)
    await eventually { key.told.values.last == "loaded(1, two, 2)" }
    #expect(
      key.told.values == ["loading(1)", "loaded(1, one, 1)", "loading(1)", "loaded(1, two, 2)"], "\(key.told.values)")
    #expect(
      distinct(key.heard.values) == ["loading - -", "loaded one 1", "loading - -", "loaded two 2"], "\(key.heard.values)")
    key.end()
  }
}
