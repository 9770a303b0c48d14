@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// "A claim keeps its loader alive": the claims share one reference to their loader, taken by the
/// first claim made and given back by the last one freed (``ContentLoader/claimMade()``), instead
/// of a retain and a release each. These check that it is held exactly as long as some claim
/// exists, ended or not, and given back once, whichever threads make and free the claims.
@Suite("ContentLoader: a claim keeps its loader alive", .timeLimit(.minutes(1)))
struct ContentLoaderClaimLifetimeTests {
  @Test func claimsKeepTheirLoaderUntilTheLastIsFreedEndedOrNot() async {
    let source = KeyedSource()
    weak var weakLoader: Loader?
    var first: Loader.Claim?
    var second: Loader.Claim?
    do {
      let loader = Loader(idleTimeout: nil, load: { try await source.load($0) })
      weakLoader = loader
      first = await claimLoaded(0, in: loader, from: source)
      second = loader.begin(0)
    }
    #expect(weakLoader != nil, "the claims hold the loader")
    first!.end()
    first = nil
    #expect(weakLoader != nil, "one claim freed, the other still holds the loader")
    second!.end()
    #expect(weakLoader != nil, "an ended claim that is not freed still holds the loader")
    // An ended claim reads the key that the loader still holds.
    #expect(second!.snapshot.status == .loaded && second!.snapshot.value == "v1")
    second = nil
    await eventually { weakLoader == nil }
  }

  /// A claim freed without `end()` ends in its `deinit`, through the loader, before it gives the
  /// loader back.
  @Test func aClaimFreedWithoutEndEndsThroughTheLoaderItStillHolds() async {
    let source = KeyedSource()
    weak var weakLoader: Loader?
    var claim: Loader.Claim?
    var events: Reader<Loader.Event>
    do {
      let loader = Loader(idleTimeout: nil, load: { try await source.load($0) })
      weakLoader = loader
      events = Reader(loader.events)
      claim = loader.begin(0)
      await source.waitForStarts(1)
    }
    #expect(weakLoader != nil && claim!.isActive)
    claim = nil  // the last claim: its load is cancelled, then the loader goes
    #expect(await events.next(3) == ["\(Loader.Event.loading(0))", "\(Loader.Event.cancelled(0))", "end"])
    await eventually { weakLoader == nil }
  }

  /// Claims made and freed at once on several threads: the none-to-one and one-to-none
  /// transitions race, and each must take or give back exactly one reference. A reference too
  /// many keeps the loader forever; one too few frees it under a claim.
  @Test(arguments: 0..<20)
  func claimsMadeAndFreedOnSeveralThreadsGiveTheLoaderBackOnce(round: Int) async {
    weak var weakLoader: Loader?
    var kept: [Loader.Claim] = []
    do {
      let loader = Loader(idleTimeout: nil, load: { key in ("v\(key)", 1) })
      weakLoader = loader
      await withTaskGroup(of: [Loader.Claim].self) { group in
        for task in 0..<4 {
          group.addTask {
            var kept: [Loader.Claim] = []
            for step in 0..<200 {
              let claim = loader.begin((task + step) % 3)
              if step % 50 == round % 50 { kept.append(claim) } else { claim.end() }
            }
            return kept
          }
        }
        for await claims in group { kept += claims }
      }
    }
    #expect(weakLoader != nil, "the claims kept hold the loader")
    // Freed on several threads at once, some ended first and some not: each task takes its share
    // out of the pile, so that it drops the last references to them.
    let pile = Pile((0..<4).map { share in kept.enumerated().filter { $0.offset % 4 == share }.map(\.element) })
    kept = []
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<4 {
        group.addTask {
          var share = pile.take()
          for (index, claim) in share.enumerated() where index % 2 == 0 { claim.end() }
          share = []
        }
      }
    }
    await eventually { weakLoader == nil }
  }
}

/// Shares of claims that tasks take out, so that each drops the last references to its own.
private final class Pile: Sendable {
  private let shares: Mutex<[[Loader.Claim]]>
  init(_ shares: [[Loader.Claim]]) { self.shares = Mutex(shares) }
  func take() -> [Loader.Claim] { shares.withLock(owner: self) { $0.popLast() ?? [] } }
}
