/// Several instruments installed as one: each report goes to each instrument, in order.
///
/// ```swift
/// LoadInstrumentation.processWide = MultiplexLoadInstrument([
///   TracingInstrument(tracer: InstrumentationSystem.tracer),
///   MetricsInstrument(),
///   LoggingInstrument(logger: Logger(label: "loading")),
/// ])
/// ```
public struct MultiplexLoadInstrument: LoadInstrument {
  /// The instruments, told in this order.
  public var instruments: [any LoadInstrument]

  /// Creates an instrument that tells each of `instruments`, in order.
  public init(_ instruments: [any LoadInstrument]) {
    self.instruments = instruments
  }

  public func attemptStarted(_ attempt: LoadAttempt) {
    for instrument in instruments { instrument.attemptStarted(attempt) }
  }

  public func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) {
    for instrument in instruments { instrument.attemptRetrying(attempt, retry) }
  }

  public func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
    for instrument in instruments { instrument.attemptEnded(attempt, end) }
  }

  public func claimBegan(_ claim: LoadClaimReport) {
    for instrument in instruments { instrument.claimBegan(claim) }
  }

  public func claimEnded(_ claim: LoadClaimReport, duration: Duration) {
    for instrument in instruments { instrument.claimEnded(claim, duration: duration) }
  }

  public func jobReported(_ report: JobReport) {
    for instrument in instruments { instrument.jobReported(report) }
  }
}
