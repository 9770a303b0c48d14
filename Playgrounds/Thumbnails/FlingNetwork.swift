import ExampleServices

/// A thumbnail service behind a link of limited bandwidth, on simulated time, for step 9.
///
/// Every thumbnail takes ``transferTime`` when it has the link to itself; requests in flight at
/// once share the link equally, so 18 of them take 18 times as long each. Time moves only when
/// the run says so (``advance(by:settle:)``), and before each step the run lets every load the
/// loader is going to start reach the service, so the times printed are the same on every run.
final class FlingNetwork: Sendable {
  /// Simulated time, in microseconds.
  typealias Micros = Int

  struct Counts: Sendable, Equatable {
    var started = 0
    var answered = 0
    var cancelled = 0
  }

  private struct Request {
    let row: Int
    var remaining: Micros
    var continuation: CheckedContinuation<Void, any Error>?
  }

  private struct State {
    var now: Micros = 0
    var nextNumber = 0
    var inFlight: [Int: Request] = [:]
    var cancelledNumbers: Set<Int> = []
    var counts = Counts()
    var answeredAt: [Int: Micros] = [:]
  }

  let transferTime: Micros
  private let state = Locked(State())

  init(transferTime: Duration) {
    self.transferTime = Micros(transferTime.components.seconds) * 1_000_000
      + Micros(transferTime.components.attoseconds / 1_000_000_000_000)
  }

  /// `GET …/thumbnail.png` for the item in `row`; answers once the link has carried it, or throws
  /// `CancellationError` when the load is cancelled first.
  func thumbnail(row: Int) async throws -> String {
    let number = state.withLock { state in
      state.nextNumber += 1
      state.inFlight[state.nextNumber] = Request(row: row, remaining: transferTime)
      state.counts.started += 1
      return state.nextNumber
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let cancelled = state.withLock { state -> Bool in
          if state.cancelledNumbers.remove(number) != nil { return true }
          state.inFlight[number]?.continuation = continuation
          return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    } onCancel: {
      let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
        guard let request = state.inFlight.removeValue(forKey: number) else { return nil }
        state.counts.cancelled += 1
        if request.continuation == nil { state.cancelledNumbers.insert(number) }
        return request.continuation
      }
      continuation?.resume(throwing: CancellationError())
    }
    return "thumbnail \(row)"
  }

  var now: Micros { state.withLock { $0.now } }
  var inFlightCount: Int { state.withLock { $0.inFlight.count } }
  var counts: Counts { state.withLock { $0.counts } }

  /// When the request for `row` was answered, if it was.
  func answeredAt(_ row: Int) -> Micros? { state.withLock { $0.answeredAt[row] } }

  /// Moves simulated time forward by `duration` (`nil`: until nothing is in flight), answering
  /// the requests the link finishes meanwhile. Before every step it waits for `settle`: until the
  /// loader has started every load it is going to, after the last change.
  func advance(by duration: Micros?, settle: () -> Void) {
    var left = duration
    while true {
      settle()
      let (answered, done) = state.withLock { state -> ([CheckedContinuation<Void, any Error>], Bool) in
        guard let least = state.inFlight.values.map(\.remaining).min() else {
          state.now += left ?? 0
          return ([], true)
        }
        let sharing = state.inFlight.count
        if let window = left, least * sharing > window {
          for number in state.inFlight.keys { state.inFlight[number]!.remaining -= window / sharing }
          state.now += window
          return ([], true)
        }
        state.now += least * sharing
        left = left.map { $0 - least * sharing }
        var answered: [CheckedContinuation<Void, any Error>] = []
        for number in state.inFlight.keys.sorted() {
          state.inFlight[number]!.remaining -= least
          guard state.inFlight[number]!.remaining == 0, let request = state.inFlight.removeValue(forKey: number) else { continue }
          state.counts.answered += 1
          state.answeredAt[request.row] = state.now
          answered.append(request.continuation!)
        }
        return (answered, false)
      }
      for continuation in answered { continuation.resume() }
      if done { return }
    }
  }
}
