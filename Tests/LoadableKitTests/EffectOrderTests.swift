@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// The one order of effects (`Engine/EffectOrder.swift`), on its own: a host that records what
/// `carryOut(_:)` asks of it.
@Suite("The one order of effects", .timeLimit(.minutes(1)))
struct EffectOrderTests {
  /// Released last: its `deinit` records that the effects went.
  final class Released: Sendable {
    let log: Recorder<String>
    init(log: Recorder<String>) { self.log = log }
    deinit { log.append("released") }
  }

  struct Effects {
    var empty = false
    var released: Released?
  }

  final class Host: EffectsHost, Sendable {
    let log = Recorder<String>()
    func isEmpty(_ effects: Effects) -> Bool { effects.empty }
    func cancelPhase(_ effects: Effects) { log.append("cancel") }
    func notifyPhase(_ effects: Effects) {
      log.append(AttemptContext.current == nil ? "notify" : "notify inside an attempt")
    }
    func resumePhase(_ effects: Effects) {
      log.append(AttemptContext.current == nil ? "resume" : "resume inside an attempt")
    }
  }

  @Test func thePhasesRunInOrderAndTheEffectsGoLast() {
    let host = Host()
    host.carryOut(Effects(released: Released(log: host.log)))
    #expect(host.log.values == ["cancel", "notify", "resume", "released"])
  }

  @Test func emptyEffectsRunNoPhase() {
    let host = Host()
    host.carryOut(Effects(empty: true, released: Released(log: host.log)))
    #expect(host.log.values == ["released"])
  }

  /// Carried out from inside an attempt's work (a `cancelLoad()` or a job started from
  /// `performLoad()`), the phases that run user code run outside that attempt.
  @Test func observersAndWaitersAreToldOutsideTheAttemptThatCarriesTheEffectsOut() async throws {
    let host = Host()
    let insideTheWork = Recorder<Bool>()
    let loadable = AsyncLoadable { () async -> Int in
      insideTheWork.append(AttemptContext.current != nil)
      host.carryOut(Effects())
      return 1
    }
    try await loadable.load()
    #expect(insideTheWork.values == [true], "the work runs inside its attempt")
    #expect(host.log.values == ["cancel", "notify", "resume"])
  }
}
