public import CoreMetrics
public import LoadableKit
import Synchronization

/// Counts attempts, failures, retries and cancellations by loadable name with swift-metrics,
/// times attempts, and keeps gauges of the attempts, claims and jobs under way.
///
/// ```swift
/// LoadInstrumentation.processWide = MetricsInstrument()   // uses MetricsSystem.factory
/// ```
///
/// | metric | kind | dimensions |
/// |---|---|---|
/// | `loadable_attempts_total` | counter | `name`, `intent` |
/// | `loadable_failures_total` | counter (failed or timed out) | `name` |
/// | `loadable_timeouts_total` | counter | `name` |
/// | `loadable_retries_total` | counter | `name` |
/// | `loadable_cancellations_total` | counter | `name` |
/// | `loadable_attempt_duration` | timer | `name`, `outcome` |
/// | `loadable_attempt_callers` | recorder: callers that waited for each attempt | `name` |
/// | `loadable_attempts_running` | meter (gauge): attempts under way | — |
/// | `loadable_claims_active` | meter (gauge): claims held | `loader` |
/// | `loadable_jobs_running` | meter (gauge): jobs whose status is `started` | — |
/// | `loadable_job_messages_total` | counter | `job`, `severity` |
///
/// Names become a dimension, so keep them few: by default a keyed loadable's subscript is
/// dropped (`thumbnails[42]` counts as `thumbnails[]`); pass `dimension` to map names yourself.
public final class MetricsInstrument: LoadInstrument, Sendable {
  /// The label prefix, `loadable` by default.
  public let prefix: String
  private let factory: any MetricsFactory
  private let dimension: @Sendable (String) -> String
  private let running: Meter
  private let jobsRunning: Meter
  /// The jobs counted in `jobsRunning`: only jobs that are started, so it stays bounded.
  private let startedJobs = Mutex<Set<UInt64>>([])

  /// Creates an instrument.
  ///
  /// - Parameters:
  ///   - prefix: the first part of every label.
  ///   - factory: where the metrics go; `MetricsSystem.factory` by default.
  ///   - dimension: the value of the `name` dimension for a loadable's name.
  public init(
    prefix: String = "loadable", factory: any MetricsFactory = MetricsSystem.factory,
    dimension: @escaping @Sendable (String) -> String = MetricsInstrument.withoutSubscript
  ) {
    self.prefix = prefix
    self.factory = factory
    self.dimension = dimension
    self.running = Meter(label: "\(prefix)_attempts_running", dimensions: [], factory: factory)
    self.jobsRunning = Meter(label: "\(prefix)_jobs_running", dimensions: [], factory: factory)
  }

  /// `thumbnails[42]` → `thumbnails[]`: a keyed loadable's name without its key.
  @Sendable public static func withoutSubscript(_ name: String) -> String {
    guard name.hasSuffix("]"), let open = name.lastIndex(of: "[") else { return name }
    return name[..<open] + "[]"
  }

  private func count(_ metric: String, _ dimensions: [(String, String)], by amount: Int = 1) {
    Counter(label: "\(prefix)_\(metric)", dimensions: dimensions, factory: factory).increment(by: amount)
  }

  public func attemptStarted(_ attempt: LoadAttempt) {
    count("attempts_total", [("name", dimension(attempt.name)), ("intent", attempt.intent.rawValue)])
    running.increment()
  }

  public func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) {
    count("retries_total", [("name", dimension(attempt.name))])
  }

  public func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
    running.decrement()
    let name = dimension(attempt.name)
    let outcome: String
    switch end.outcome {
    case .loaded:
      outcome = "loaded"
    case .failed:
      outcome = "failed"
      count("failures_total", [("name", name)])
    case .timedOut:
      outcome = "timedOut"
      count("failures_total", [("name", name)])
      count("timeouts_total", [("name", name)])
    case .cancelled:
      outcome = "cancelled"
      count("cancellations_total", [("name", name)])
    }
    Timer(label: "\(prefix)_attempt_duration", dimensions: [("name", name), ("outcome", outcome)], factory: factory)
      .record(duration: end.duration)
    Recorder(label: "\(prefix)_attempt_callers", dimensions: [("name", name)], factory: factory)
      .record(end.callers)
  }

  public func claimBegan(_ claim: LoadClaimReport) {
    Meter(label: "\(prefix)_claims_active", dimensions: [("loader", claim.loader)], factory: factory).increment()
  }

  public func claimEnded(_ claim: LoadClaimReport, duration: Duration) {
    Meter(label: "\(prefix)_claims_active", dimensions: [("loader", claim.loader)], factory: factory).decrement()
  }

  public func jobReported(_ report: JobReport) {
    switch report.event {
    case .status(let status):
      let change = startedJobs.withLock { started -> Int in
        if status == .started { return started.insert(report.id).inserted ? 1 : 0 }
        return started.remove(report.id) != nil ? -1 : 0
      }
      if change > 0 { jobsRunning.increment() }
      if change < 0 { jobsRunning.decrement() }
    case .message(let message):
      count("job_messages_total", [("job", report.job), ("severity", message.severity.rawValue)])
    case .progress:
      break
    }
  }
}

extension Timer {
  fileprivate func record(duration: Duration) {
    let (seconds, attoseconds) = duration.components
    recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
  }
}
