/// The transient-error policy of one job's run of retries, on the instants of the job's clock.
///
/// A window opens at the first transient error, and again at the first error after a new
/// checkpoint or after the job was resumed from a pause (time paused is not time failing). While
/// the window is open each error earns a retry after the backoff delay, cut so
/// that the last retry happens when the window closes; an error at or past the close gives up.
struct TransientWindow<Instant: InstantProtocol> where Instant.Duration == Duration {
  enum Decision: Equatable {
    case retry(after: Duration, attempt: Int)
    case giveUp
  }

  private var start: Instant?
  private var generation: UInt64 = 0
  private var resumes: UInt64 = 0
  private var attempts = 0

  /// - Parameters:
  ///   - checkpointGeneration: Counts the job's saved checkpoints.
  ///   - resumes: Counts the job's resumes from a pause.
  mutating func record(
    errorAt now: Instant, checkpointGeneration: UInt64, resumes: UInt64 = 0, window: Duration, backoff: Backoff
  ) -> Decision {
    if start == nil || generation != checkpointGeneration || self.resumes != resumes {
      start = now
      generation = checkpointGeneration
      self.resumes = resumes
      attempts = 0
    }
    let elapsed = start.map { $0.duration(to: now) } ?? .zero
    guard elapsed < window else { return .giveUp }
    attempts += 1
    return .retry(after: min(backoff.delay(forAttempt: attempts), window - elapsed), attempt: attempts)
  }
}
