/// Something an app installs to hear what loadables, content loaders and jobs do: which attempt
/// started for whom, how long it took and how it ended; which claims began and ended; how jobs
/// moved.
///
/// Install one for the whole process with ``LoadInstrumentation/processWide``, or for one loadable
/// with ``AsyncLoadable/instrument``. Every method has a default that does nothing, so an
/// instrument implements only what it needs:
///
/// ```swift
/// struct SlowLoadLogger: LoadInstrument {
///   func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
///     if end.duration > .seconds(1) { print("\(attempt.name) took \(end.duration)") }
///   }
/// }
/// LoadInstrumentation.processWide = SlowLoadLogger()
/// ```
///
/// The adapters in the `Integrations` package turn these calls into swift-distributed-tracing
/// spans, swift-metrics counters and timers, and swift-log lines (see <doc:ObservingLoadables>).
///
/// ## Guarantees
///
/// - Every method is called outside every lock of the library, so an instrument may read the
///   loadable it hears about, or even load it (mind that such a load is itself reported).
/// - Each attempt is reported as exactly one ``attemptStarted(_:)`` followed, on the same
///   instrument, by exactly one ``attemptEnded(_:_:)``, with any ``attemptRetrying(_:_:)`` calls
///   between them. A started call always comes before the ``LoadAttempt/parent``'s ended call,
///   as the parent waits for (or started) the child.
/// - Calls come from whatever task did the work; different attempts report concurrently. The
///   instrument must be thread-safe and should return quickly: it runs on the loading path.
public protocol LoadInstrument: Sendable {
  /// An attempt started.
  ///
  /// - Parameter attempt: the attempt: its loadable's name, its intent and the attempt that asked
  ///   for it, if any.
  func attemptStarted(_ attempt: LoadAttempt)

  /// A try within the attempt failed and the loadable's ``RetryPolicy`` tries again after a delay.
  func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry)

  /// The attempt ended: loaded, failed, cancelled or timed out.
  ///
  /// A cancelled attempt ends when its work returns (at once for cooperative work).
  func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End)

  /// A ``ContentLoader`` claim began.
  func claimBegan(_ claim: LoadClaimReport)

  /// A ``ContentLoader`` claim ended, explicitly or because it was released.
  func claimEnded(_ claim: LoadClaimReport, duration: Duration)

  /// A job changed status, posted a message, or crossed a tenth of its progress.
  func jobReported(_ report: JobReport)
}

extension LoadInstrument {
  /// Does nothing.
  public func attemptStarted(_ attempt: LoadAttempt) {}
  /// Does nothing.
  public func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) {}
  /// Does nothing.
  public func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {}
  /// Does nothing.
  public func claimBegan(_ claim: LoadClaimReport) {}
  /// Does nothing.
  public func claimEnded(_ claim: LoadClaimReport, duration: Duration) {}
  /// Does nothing.
  public func jobReported(_ report: JobReport) {}
}
