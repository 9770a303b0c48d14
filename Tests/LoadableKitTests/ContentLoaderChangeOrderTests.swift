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
  /// change, in order". A key's load that ends and is refreshed before the loader reads the key
  /// (here: the refresh comes from an observer of the key's loadable, which runs before the
  /// loader's status hook — the same window another thread's refresh hits) is never reported:
  /// neither the events nor the claim's handler ever hear `loaded(1, one, 1)`.
  @Test func aResultRefreshedAtOnceIsStillReported() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let events = loader.events(bufferingPolicy: .unbounded)
    let told = Recorder<String>()
    let reading = Task { for await event in events { told.append("\(event)") } }
    let heard = Recorder<String>()
    let claim = loader.begin(1) { heard.append(describe($0)) }
    await source.waitForStarts(1)
    let refreshes = Counter()
    let observation = loader.loadable(for: 1).observeLoadStatus { status in
      if status == .loaded, refreshes.increment() == 1 { loader.refresh(1) }
    }
    source.resolve(1, "one", version: 1)
    await source.waitForStarts(2)
    source.resolve(1, "two", version: 2)
    await eventually { heard.values.last == "loaded two 2" && told.values.last == "loaded(1, two, 2)" }
    #expect(
      told.values == ["loading(1)", "loaded(1, one, 1)", "loadingWithPriorValue(1, one, 1)", "loaded(1, two, 2)"])
    #expect(distinct(heard.values) == ["loading - -", "loaded one 1", "loading one 1", "loaded two 2"])
    observation.cancel()
    claim.end()
    reading.cancel()
  }

  /// The same merge with a failure: a failed load retried before the loader reads the key is
  /// never reported as `failed(1, …)`, and the claim's handler never sees the failed snapshot.
  @Test func aFailureRetriedAtOnceIsStillReported() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let events = loader.events(bufferingPolicy: .unbounded)
    let told = Recorder<String>()
    let reading = Task { for await event in events { told.append("\(event)") } }
    let heard = Recorder<String>()
    let claim = loader.begin(1) { heard.append("\($0.status)") }
    await source.waitForStarts(1)
    let retries = Counter()
    let observation = loader.loadable(for: 1).observeLoadStatus { status in
      if status == .failed, retries.increment() == 1 { loader.refresh(1) }
    }
    source.fail(1, Boom(code: 1))
    await source.waitForStarts(2)
    source.resolve(1, "two", version: 2)
    await eventually { heard.values.last == "loaded" && told.values.last == "loaded(1, two, 2)" }
    #expect(told.values == ["loading(1)", "failed(1, Boom(code: 1))", "loading(1)", "loaded(1, two, 2)"])
    #expect(distinct(heard.values) == ["loading", "failed", "loading", "loaded"])
    observation.cancel()
    claim.end()
    reading.cancel()
  }
}

/// A load's end followed at once by a local write or a removal (a second review of the fix above).
extension ContentLoaderChangeOrderTests {
  /// LoadingKeyedContent (34b06a3): "Two changes of one key that happen before the first is
  /// noticed ... are still told as two, the end first ... Only a load cancelled and another started
  /// at once may be told as one"; ContentLoader.Event: "one per change, never merged". A load that
  /// ends and a local write (`set(_:version:for:)`) made before the loader read the key — here
  /// from an observer of the key's loadable, which runs before the loader's status hook, the
  /// window of the fix's own tests — are told as the write alone: `record` sees the attempt shown
  /// gone and the content changed, and tells `.loaded` with the value read now
  /// (ContentLoaderState+Sync.swift:151-154, after ContentLoaderState+Write.swift:13 wrote); `loaded(1, one, 1)` is never told, and the claim's
  /// handler never sees "loaded one 1". `EndBefore` covers only an end followed by a start.
  @Test(arguments: ["loaded", "failed"])
  func aLoadsEndFollowedAtOnceByAWriteIsStillReported(end: String) async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let events = loader.events(bufferingPolicy: .unbounded)
    let told = Recorder<String>()
    let reading = Task { for await event in events { told.append("\(event)") } }
    let heard = Recorder<String>()
    let claim = loader.begin(1) { heard.append(describe($0)) }
    await source.waitForStarts(1)
    let writes = Counter()
    let observation = loader.loadable(for: 1).observeLoadStatus { status in
      if status == .loaded || status == .failed, writes.increment() == 1 { _ = loader.set("w", version: 5, for: 1) }
    }
    if end == "loaded" { source.resolve(1, "one", version: 1) } else { source.fail(1, Boom(code: 1)) }
    await eventually { told.values.last == "loaded(1, w, 5)" }
    let ended = end == "loaded" ? "loaded(1, one, 1)" : "failed(1, Boom(code: 1))"
    #expect(told.values == ["loading(1)", ended, "loaded(1, w, 5)"], "\(told.values)")
    let shown = end == "loaded" ? "loaded one 1" : "failed - -"
    #expect(distinct(heard.values) == ["loading - -", shown, "loaded w 5"], "\(heard.values)")
    observation.cancel()
    claim.end()
    reading.cancel()
  }

  /// The same for a removal (`remove(_:)`) made right after the load ended: the removal's fresh
  /// load is told (`loading(1)`), the end before it never is.
  @Test func aLoadsEndFollowedAtOnceByARemovalIsStillReported() async {
    let source = KeyedSource()
    let loader = makeLoader(source)
    let events = loader.events(bufferingPolicy: .unbounded)
    let told = Recorder<String>()
    let reading = Task { for await event in events { told.append("\(event)") } }
    let heard = Recorder<String>()
    let claim = loader.begin(1) { heard.append(describe($0)) }
    await source.waitForStarts(1)
    let removals = Counter()
    let observation = loader.loadable(for: 1).observeLoadStatus { status in
      if status == .loaded, removals.increment() == 1 { loader.remove(1) }
    }
    source.resolve(1, "one", version: 1)
    await source.waitForStarts(2)
    source.resolve(1, "two", version: 2)
    await eventually { told.values.last == "loaded(1, two, 2)" }
    #expect(told.values == ["loading(1)", "loaded(1, one, 1)", "loading(1)", "loaded(1, two, 2)"], "\(told.values)")
    #expect(distinct(heard.values) == ["loading - -", "loaded one 1", "loading - -", "loaded two 2"], "\(heard.values)")
    observation.cancel()
    claim.end()
    reading.cancel()
  }
}
