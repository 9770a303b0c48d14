public import LoadableKit
public import Logging

/// Logs one line per failed attempt and per retry with swift-log, at levels an app sets.
///
/// ```swift
/// LoadInstrumentation.processWide = LoggingInstrument(logger: Logger(label: "app.loading"))
/// ```
///
/// A failure reads `portal failed after 2 retries in 312 ms: <error>`; a retry reads
/// `portal will retry (1) in 200 ms after: <error>`. Each line carries the metadata
/// `loadable.name`, `loadable.attempt`, `loadable.intent` and, when a dependent asked for the
/// attempt, `loadable.parent`. Cancellations, successes and job events are logged only when
/// their level is set.
public struct LoggingInstrument: LoadInstrument {
  /// The logger lines go to.
  public var logger: Logger
  /// The level of a failed or timed-out attempt; `.error` by default.
  public var failureLevel: Logger.Level
  /// The level of a retry within an attempt; `.warning` by default.
  public var retryLevel: Logger.Level
  /// The level of a cancelled attempt; `nil` (the default) logs none.
  public var cancellationLevel: Logger.Level?
  /// The level of a successful attempt; `nil` (the default) logs none.
  public var successLevel: Logger.Level?
  /// The level of a job that failed; `.error` by default (`nil` for none).
  public var jobFailureLevel: Logger.Level?

  /// Creates an instrument.
  public init(
    logger: Logger, failureLevel: Logger.Level = .error, retryLevel: Logger.Level = .warning,
    cancellationLevel: Logger.Level? = nil, successLevel: Logger.Level? = nil,
    jobFailureLevel: Logger.Level? = .error
  ) {
    self.logger = logger
    self.failureLevel = failureLevel
    self.retryLevel = retryLevel
    self.cancellationLevel = cancellationLevel
    self.successLevel = successLevel
    self.jobFailureLevel = jobFailureLevel
  }

  public func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) {
    logger.log(
      level: retryLevel,
      "\(attempt.name) will retry (\(retry.number)) in \(milliseconds(retry.delay)) after: \(String(describing: retry.error))",
      metadata: metadata(attempt))
  }

  public func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
    let after = end.retries == 0 ? "" : " after \(end.retries) \(end.retries == 1 ? "retry" : "retries")"
    let took = milliseconds(end.duration)
    switch end.outcome {
    case .failed(let error):
      logger.log(
        level: failureLevel, "\(attempt.name) failed\(after) in \(took): \(String(describing: error))",
        metadata: metadata(attempt))
    case .timedOut:
      logger.log(level: failureLevel, "\(attempt.name) timed out\(after) in \(took)", metadata: metadata(attempt))
    case .cancelled:
      if let cancellationLevel {
        logger.log(level: cancellationLevel, "\(attempt.name) cancelled in \(took)", metadata: metadata(attempt))
      }
    case .loaded:
      if let successLevel {
        logger.log(level: successLevel, "\(attempt.name) loaded\(after) in \(took)", metadata: metadata(attempt))
      }
    }
  }

  public func jobReported(_ report: JobReport) {
    guard let jobFailureLevel, case .status(.failed) = report.event else { return }
    logger.log(
      level: jobFailureLevel, "job \(report.job) #\(report.id) failed",
      metadata: ["job.kind": .string(report.job), "job.id": .stringConvertible(report.id)])
  }

  private func metadata(_ attempt: LoadAttempt) -> Logger.Metadata {
    var metadata: Logger.Metadata = [
      "loadable.name": .string(attempt.name),
      "loadable.attempt": .stringConvertible(attempt.id.rawValue),
      "loadable.intent": .string(attempt.intent.rawValue),
    ]
    if let parent = attempt.parent { metadata["loadable.parent"] = .stringConvertible(parent.rawValue) }
    return metadata
  }
}

/// `"212 ms"`, or `"4.5 ms"` below 10 ms.
func milliseconds(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
  if milliseconds >= 10 { return "\(Int(milliseconds.rounded())) ms" }
  return "\(Double(Int((milliseconds * 10).rounded())) / 10) ms"
}
