@testable import LoadableKit
import LoadableKitTesting
import Testing

/// The other serial mechanism (`Support/RunAgainFlag.swift`): one runner at a time, and requests
/// during a pass merged into one more pass. Tested synchronously as a value.
@Suite("Run-again flag", .timeLimit(.minutes(1)))
struct RunAgainFlagTests {
  /// The flag in a box, so that `#expect` can call its mutating methods.
  final class Flag {
    var flag = RunAgainFlag()
    var isRunning: Bool { flag.isRunning }
    func request() -> Bool { flag.request() }
    func beginPass() { flag.beginPass() }
    func endPass() -> Bool { flag.endPass() }
  }

  @Test func aRequestDuringAPassRunsOneMorePassForAll() {
    let flag = Flag()
    #expect(!flag.isRunning)
    #expect(flag.request(), "the first request makes its caller the runner")
    #expect(!flag.request(), "a runner is at work")
    #expect(!flag.request())
    #expect(flag.endPass(), "requests came during the pass: one more pass, for all of them")
    #expect(flag.isRunning)
    #expect(!flag.endPass(), "none came during that pass: the role ends")
    #expect(!flag.isRunning)
    #expect(flag.request(), "the next request finds it idle")
  }

  @Test func aPassAnswersTheRequestsBeforeItBegan() {
    let flag = Flag()
    #expect(flag.request())
    #expect(!flag.request(), "came before the pass read the state")
    flag.beginPass()
    #expect(!flag.endPass(), "the pass read the state after that request: nothing left to do")
    #expect(!flag.isRunning)
  }

  /// Requests and passes interleaved at random (seeded): there is never more than one runner, and
  /// no request is left without a pass that began after it when the role ends.
  @Test(arguments: 0..<10) func noRequestIsLostAndOneRunsAtATime(seed: UInt64) {
    var random = SplitMix64(seed: seed)
    let flag = Flag()
    var runner = false  // whether the simulated runner holds the role
    var inPass = false
    var step = 0
    var lastRequest = -1
    var lastPassBegin = -1
    for _ in 0..<2_000 {
      step += 1
      switch random.next() % 3 {
      case 0:
        lastRequest = step
        if flag.request() {
          #expect(!runner, "seed \(seed): a second runner")
          runner = true
        }
      case 1 where runner && !inPass:
        inPass = true
        if random.next() % 2 == 0 { flag.beginPass() }
        lastPassBegin = step
      case 2 where runner && inPass:
        inPass = false
        if !flag.endPass() {
          runner = false
          #expect(lastPassBegin >= lastRequest, "seed \(seed): a request at step \(lastRequest) was left unrun")
        }
      default:
        break
      }
      #expect(flag.isRunning == runner)
    }
  }
}
