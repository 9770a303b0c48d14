import ExampleServices
import LoadableKit
import LoadableKitTesting

/// A thumbnail service that answers each request a fixed time after it was sent — an overloaded
/// server, not a narrow link — on simulated time, for step 10.
///
/// With `ignoresCancellation`, a request goes on after its load is cancelled: work that ignores
/// cancellation (a decode, an SDK call) returns only when it is done.
final class SlowService: Sendable {
  typealias Micros = FlingNetwork.Micros

  private struct Request {
    let answersAt: Micros
    var continuation: CheckedContinuation<Void, any Error>?
  }

  private struct State {
    var now: Micros = 0
    var sent = 0
    var pending: [Int: Request] = [:]
    var cancelledEarly: Set<Int> = []
  }

  let latency: Micros
  let ignoresCancellation: Bool
  private let state = Locked(State())

  init(latency: Micros, ignoresCancellation: Bool) {
    self.latency = latency
    self.ignoresCancellation = ignoresCancellation
  }

  var now: Micros { state.withLock { $0.now } }
  var sent: Int { state.withLock { $0.sent } }

  /// Sends a request; returns its number (requests are numbered in the order they were sent) once
  /// the service answers, or throws `CancellationError` when the load is cancelled first (unless
  /// the work ignores cancellation).
  func request() async throws -> Int {
    let number = state.withLock { state in
      state.sent += 1
      state.pending[state.sent] = Request(answersAt: state.now + latency)
      return state.sent
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let cancelled = state.withLock { state -> Bool in
          if state.cancelledEarly.remove(number) != nil { return true }
          state.pending[number]?.continuation = continuation
          return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    } onCancel: {
      if ignoresCancellation { return }
      let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
        guard let request = state.pending.removeValue(forKey: number) else { return nil }
        if request.continuation == nil { state.cancelledEarly.insert(number) }
        return request.continuation
      }
      continuation?.resume(throwing: CancellationError())
    }
    return number
  }

  /// Moves simulated time forward to `time` (`nil`: until nothing is pending), answering the
  /// requests due meanwhile in the order they are due; `settle` runs before every step.
  func advance(to time: Micros?, settle: () -> Void) {
    while true {
      settle()
      let due = state.withLock { state -> CheckedContinuation<Void, any Error>? in
        let next = state.pending.filter { $0.value.continuation != nil }.min {
          ($0.value.answersAt, $0.key) < ($1.value.answersAt, $1.key)
        }
        guard let (number, request) = next, time.map({ request.answersAt <= $0 }) ?? true else {
          if let time { state.now = max(state.now, time) }
          return nil
        }
        state.now = max(state.now, request.answersAt)
        state.pending[number] = nil
        return request.continuation
      }
      guard let due else { return }
      due.resume()
    }
  }
}

/// What a pull-to-refresh during slow loads cost (step 10).
struct RefreshOutcome {
  /// After the pull: until the first and the last row drew a thumbnail its fresh request brought.
  var firstFreshDrawn: FlingNetwork.Micros
  var allFreshDrawn: FlingNetwork.Micros
  /// Requests sent, and answers of requests sent before the pull that were drawn after it.
  var requests: Int
  var staleDrawnAfterThePull: Int
}

/// The screen's `rows` load from a slow service (each answer takes `latency`); `pullAfter` into
/// their loads the user pulls to refresh (`refreshAll()`), and the service answers what is left.
///
/// A loader whose keys ran one load at a time (the design issue 27 replaced) sent each fresh
/// request only once the stale work returned — at once when it stops on cancellation, only when
/// it is done when it ignores it. A refresh now supersedes the running load and asks at once
/// (SPEC §5).
func pullToRefresh(
  ignoresCancellation: Bool, rows: Int = 6, latency: FlingNetwork.Micros = 2_000_000,
  pullAfter: FlingNetwork.Micros = 500_000
) -> RefreshOutcome {
  let service = SlowService(latency: latency, ignoresCancellation: ignoresCancellation)
  let executor = ManualTaskExecutor()
  // A request's number is its answer's version: a fresher request, a newer version.
  let loader = ContentLoader<Int, Int, Int>(idleTimeout: nil, taskExecutor: executor) { _ in
    let number = try await service.request()
    return (number, number)
  }
  // The cell draws what its claim shows, at the simulated time it shows it.
  let drawn = Locked<[Int: [(request: Int, at: FlingNetwork.Micros)]]>([:])
  let claims = (0..<rows).map { row in
    loader.begin(row) { snapshot in
      guard let request = snapshot.value else { return }
      let now = service.now
      drawn.withLock { drawn in
        if drawn[row]?.last?.request != request { drawn[row, default: []].append((request, now)) }
      }
    }
  }
  let settle = { _ = executor.runInOrder() }
  service.advance(to: pullAfter, settle: settle)
  let sentBefore = service.sent
  loader.refreshAll()
  service.advance(to: nil, settle: settle)
  let frames = drawn.withLock { $0 }
  let fresh = (0..<rows).map { row in frames[row]?.first { $0.request > sentBefore }.map { $0.at - pullAfter } ?? .max }
  let stale = (0..<rows).flatMap { frames[$0] ?? [] }.filter { $0.request <= sentBefore && $0.at > pullAfter }.count
  for claim in claims { claim.end() }
  settle()
  return RefreshOutcome(
    firstFreshDrawn: fresh.min() ?? 0, allFreshDrawn: fresh.max() ?? 0, requests: service.sent,
    staleDrawnAfterThePull: stale)
}
