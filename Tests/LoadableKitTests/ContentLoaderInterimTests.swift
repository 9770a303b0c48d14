@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// Issue 30: interim values — a key's load shows values before its result (a disk copy read
/// asynchronously, a preview), as prior values with `.loading`, under the version rule.
@Suite("ContentLoader interim values (issue 30)", .timeLimit(.minutes(1)))
struct ContentLoaderInterimTests {
  /// A loader over `source` whose loads hand their ``ContentLoader/InterimValues`` to the test,
  /// in the order the loads call the data source.
  func makeInterimLoader(
    _ source: KeyedSource, prior: @escaping @Sendable (Int) -> (value: String, version: Int)? = { _ in nil }
  ) -> (Loader, Recorder<Loader.InterimValues>) {
    let handles = Recorder<Loader.InterimValues>()
    let loader = Loader(
      idleTimeout: nil, existingValue: prior,
      load: { key, interim in
        handles.append(interim)
        return try await source.load(key)
      })
    return (loader, handles)
  }

  @Test func anInterimValueIsShownWhileLoadingThenTheResult() async {
    let source = KeyedSource()
    let (loader, handles) = makeInterimLoader(source)
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    let seen = Recorder<String>()
    let claim = loader.begin(1) { seen.append(describe($0)) }
    await source.waitForStarts(1)
    #expect(handles.values[0].deliver("disk", version: 1))
    #expect(describe(claim.snapshot) == "loading disk 1")
    #expect(loader.snapshot(for: 1).map(describe) == "loading disk 1")
    // Only a result is the content of the key's loadable.
    #expect(loader.loadable(for: 1).content == nil)
    source.resolve(1, "network", version: 2)
    await eventually { claim.snapshot.status == .loaded }
    #expect(await events.next(3) == ["loading(1)", "loadingWithPriorValue(1, disk, 1)", "loaded(1, network, 2)"])
    // The claim's handler hears of the change after its snapshot shows it (it is called outside
    // the loader's locks, possibly by another thread): wait for it before reading what it saw.
    await eventually { seen.values.last?.hasPrefix("loaded") == true }
    #expect(distinct(seen.values) == ["loading - -", "loading disk 1", "loaded network 2"])
    #expect(loader.loadable(for: 1).content == "network")
    claim.end()
  }

  @Test func theVersionRuleHoldsBetweenInterimValuesAndTheResult() async {
    let source = KeyedSource()
    let (loader, handles) = makeInterimLoader(source, prior: { _ in ("memory", 5) })
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    let interim = handles.values[0]
    // Not newer than the prior value shown: dropped.
    #expect(!interim.deliver("older", version: 4))
    #expect(!interim.deliver("same", version: 5))
    #expect(describe(claim.snapshot) == "loading memory 5")
    #expect(interim.deliver("disk", version: 7))
    // Not newer than the interim value shown: dropped.
    #expect(!interim.deliver("disk again", version: 7))
    #expect(!interim.deliver("older disk", version: 6))
    #expect(describe(claim.snapshot) == "loading disk 7")
    // A result older than the interim value shown is dropped: the load ends, with the interim
    // value as its result.
    source.resolve(1, "network", version: 6)
    await eventually { claim.snapshot.status == .loaded }
    #expect(describe(claim.snapshot) == "loaded disk 7")
    #expect(loader.loadable(for: 1).content == "disk")
    #expect(
      await events.next(3) == ["loadingWithPriorValue(1, memory, 5)", "loadingWithPriorValue(1, disk, 7)", "loaded(1, disk, 7)"])
    // Its load returned: too late.
    #expect(!interim.deliver("late", version: 99))
    #expect(describe(claim.snapshot) == "loaded disk 7")
    // A result newer than the interim value shown replaces it.
    loader.refresh(1)
    await source.waitForStarts(2)
    #expect(!handles.values[1].deliver("same disk", version: 7))
    #expect(handles.values[1].deliver("disk", version: 8))
    #expect(describe(claim.snapshot) == "loading disk 8")
    source.resolve(1, "network", version: 9)
    await eventually { claim.snapshot.status == .loaded }
    #expect(describe(claim.snapshot) == "loaded network 9")
    claim.end()
  }

  @Test func anInterimValueAfterItsLoadWasSupersededOrCancelledIsDropped() async {
    let source = KeyedSource(ignoresCancellation: true)  // superseded work goes on, and delivers
    let (loader, handles) = makeInterimLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    // Superseded by a refresh.
    loader.refresh(1)
    await source.waitForStarts(2)
    #expect(!handles.values[0].deliver("stale", version: 9))
    #expect(describe(claim.snapshot) == "loading - -")
    #expect(handles.values[1].deliver("disk", version: 1))
    // Superseded by a local write (newer than the interim value shown).
    #expect(loader.set("edited", version: 2, for: 1))
    #expect(!handles.values[1].deliver("late", version: 9))
    #expect(describe(claim.snapshot) == "loaded edited 2")
    // Superseded by a removal.
    loader.refresh(1)
    await source.waitForStarts(3)
    loader.remove(1)
    await source.waitForStarts(4)
    #expect(!handles.values[2].deliver("removed", version: 9))
    #expect(describe(claim.snapshot) == "loading - -")
    // Cancelled: the claims ended.
    claim.end()
    #expect(!handles.values[3].deliver("gone", version: 9))
    #expect(loader.snapshot(for: 1).map(describe) ?? "none" != "notLoaded gone 9")
    #expect(loader.snapshot(for: 1)?.value == nil)
    for _ in 0..<4 { source.resolve(1, "late", version: 1) }
  }

  @Test func aFailedLoadLeavesItsInterimValueShownAndAWriteMustBeNewer() async {
    let source = KeyedSource()
    let (loader, handles) = makeInterimLoader(source)
    var events = Reader(loader.events(bufferingPolicy: .unbounded))
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    #expect(handles.values[0].deliver("disk", version: 3))
    #expect(!loader.set("older", version: 3, for: 1))
    #expect(describe(claim.snapshot) == "loading disk 3")
    source.fail(1, URLError())
    await eventually { claim.snapshot.status == .failed }
    // Offline: the disk copy stays on screen with the error, as a prior value would.
    #expect(describe(claim.snapshot) == "failed disk 3")
    #expect(await events.next(3) == ["loading(1)", "loadingWithPriorValue(1, disk, 3)", "failed(1, URLError())"])
    #expect(loader.set("edited", version: 4, for: 1))
    #expect(describe(claim.snapshot) == "loaded edited 4")
    claim.end()
  }

  @Test func anInterimValueOutlivesACancelledLoad() async {
    let source = KeyedSource()
    let (loader, handles) = makeInterimLoader(source)
    let claim = loader.begin(1)
    await source.waitForStarts(1)
    #expect(handles.values[0].deliver("disk", version: 2))
    claim.end()
    await source.waitUntil { $0.cancelled == 1 }
    // The key went back to how it was before the load, and kept the value delivered, as a prior
    // value: the next claim shows it at once while the key loads again.
    #expect(loader.snapshot(for: 1).map(describe) == "notLoaded disk 2")
    let again = loader.begin(1)
    #expect(describe(again.snapshot) == "loading disk 2")
    await source.waitForStarts(2)
    #expect(!handles.values[1].deliver("older", version: 1))
    source.resolve(1, "network", version: 3)
    await eventually { again.snapshot.status == .loaded }
    #expect(describe(again.snapshot) == "loaded network 3")
    again.end()
  }

  /// An `InterimValues` kept after its load returned holds nothing: the key's entry, evicted,
  /// goes with its value, and a delivery through it is ignored.
  @Test func interimValuesKeptPastTheirLoadDoNotKeepTheKey() async throws {
    let control = ControlledLoad<Tracked>()
    let released = Counter()
    let kept = Recorder<ContentLoader<Int, Tracked, Int>.InterimValues>()
    let loader = ContentLoader<Int, Tracked, Int>(maximumIdleCount: 0) { _, interim in
      kept.append(interim)
      return (try await control.operation(), 2)
    }
    let claim = loader.begin(1)
    try await control.waitForStart()
    control.resolve(Tracked(released))
    await eventually { claim.snapshot.status == .loaded }
    claim.end()  // evicted at once: no idle entries are kept
    #expect(loader.count == 0)
    // The attempt's task lets go of the entry a moment after its result was seen (see
    // `ContentLoaderTests.evictionReleasesTheValueEvenWhileAnEndedClaimIsHeld`).
    await eventually { released.count == 1 }
    #expect(!kept.values[0].deliver(Tracked(Counter()), version: 3))
    #expect(loader.snapshot(for: 1) == nil)
  }

  /// The guide's example ("Interim values"): a disk cache read asynchronously before the network.
  @Test func aDiskCacheReadBeforeTheNetwork() async {
    let network = KeyedSource()
    let diskCache = DiskCache()
    await diskCache.store(("disk copy", 1), for: 1)
    let thumbnails = Loader(
      idleTimeout: nil,
      load: { key, interim in
        if let copy = await diskCache.value(for: key) {  // read off the caller's thread
          interim.deliver(copy.value, version: copy.version)  // shown at once, still loading
        }
        let fresh = try await network.load(key)
        await diskCache.store(fresh, for: key)
        return fresh
      })
    let seen = Recorder<String>()
    let claim = thumbnails.begin(1) { seen.append(describe($0)) }
    await network.waitForStarts(1)
    #expect(describe(claim.snapshot) == "loading disk copy 1")
    network.resolve(1, "from the network", version: 2)
    await eventually { claim.snapshot.status == .loaded }
    // The claim's handler hears of the change after its snapshot shows it (it is called outside
    // the loader's locks, possibly by another thread): wait for it before reading what it saw.
    await eventually { seen.values.last?.hasPrefix("loaded") == true }
    #expect(distinct(seen.values) == ["loading - -", "loading disk copy 1", "loaded from the network 2"])
    #expect(await diskCache.value(for: 1)?.version == 2)
    claim.end()
  }
}

/// A disk cache read asynchronously.
actor DiskCache {
  private var stored: [Int: (value: String, version: Int)] = [:]
  func value(for key: Int) async -> (value: String, version: Int)? { stored[key] }
  func store(_ entry: (value: String, version: Int), for key: Int) { stored[key] = entry }
}

struct URLError: Error, CustomStringConvertible {
  var description: String { "URLError()" }
}

/// "status value version", with "-" for what is missing.
func describe(_ snapshot: Loader.Snapshot) -> String {
  "\(snapshot.status) \(snapshot.value ?? "-") \(snapshot.version.map(String.init) ?? "-")"
}

/// `values` without repeats in a row (a change may be told twice, never missed).
func distinct(_ values: [String]) -> [String] {
  var result: [String] = []
  for value in values where value != result.last { result.append(value) }
  return result
}

/// Interim values racing refreshes and local writes in seeded interleavings (1,000 seeds): the
/// version rule holds between them and the results.
@Suite("ContentLoader interim values schedule exploration", .timeLimit(.minutes(5)))
struct ContentLoaderInterimExplorationTests {
  @Test func interimValuesRaceRefreshesAndWritesUnderTheVersionRule() {
    explore { executor, generator in
      let calls = Mutex<Int>(0)
      let plan = (0..<6).map { _ in
        (
          interims: (0..<Int.random(in: 0...2, using: &generator)).map { _ in Int.random(in: 1...12, using: &generator) },
          result: Int.random(in: 1...12, using: &generator), steps: Int.random(in: 0...3, using: &generator)
        )
      }
      let taken = Recorder<Int>()  // versions of the interim values and writes taken
      let loader = Loader(idleTimeout: nil) { _, interim in
        let call = calls.withLock { $0 += 1; return $0 }
        let step = plan[call % plan.count]
        for version in step.interims {
          await yields(step.steps)
          if interim.deliver("v\(version)", version: version) { taken.append(version) }
        }
        await yields(step.steps)  // ignores its cancellation
        return ("v\(step.result)", step.result)
      }
      let seen = Recorder<Loader.Snapshot>()
      let keep = Mutex<Loader.Claim?>(nil)
      let delays = (0..<4).map { _ in Int.random(in: 0...6, using: &generator) }
      let writes = (0..<2).map { _ in Int.random(in: 1...12, using: &generator) }
      executor.spawn {
        let claim = loader.begin(1) { seen.append($0) }
        keep.withLock { $0 = claim }
      }
      executor.spawn {
        await yields(delays[0])
        loader.refresh(1)
        await yields(delays[1])
        loader.refresh(1)
      }
      executor.spawn {
        for (index, version) in writes.enumerated() {
          await yields(delays[2 + index])
          if loader.set("v\(version)", version: version, for: 1) { taken.append(version) }
        }
      }
      return {
        var problems: [String] = []
        let claim = keep.withLock { $0 }
        let snapshots = seen.values
        let versions = snapshots.compactMap(\.version)
        if versions != versions.sorted() { problems.append("versions seen out of order: \(versions)") }
        for snapshot in snapshots where snapshot.value.map({ $0 != "v\(snapshot.version!)" }) ?? false {
          problems.append("\(describe(snapshot)): a value with another's version")
        }
        let last = claim?.snapshot
        if last?.status != .loaded { problems.append("the claim shows \(String(describing: last?.status))") }
        if let newest = taken.values.max(), (last?.version ?? 0) < newest {
          problems.append("the claim shows version \(String(describing: last?.version)), \(newest) was taken")
        }
        let content = loader.loadable(for: 1).content
        if content != last?.value {
          problems.append("the key's loadable holds \(String(describing: content)), its claim shows \(String(describing: last?.value))")
        }
        claim?.end()
        return problems
      }
    }
  }
}
