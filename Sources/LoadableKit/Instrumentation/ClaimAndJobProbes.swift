import Synchronization

/// Reports one ``ContentLoader`` claim, began and ended, to the instruments installed when it
/// began. Made only when some instrument is installed: one atomic load otherwise.
final class ClaimProbe: Sendable {
  let report: LoadClaimReport
  private let instruments: [any LoadInstrument]
  private let began = ContinuousClock.now
  private let ended = Atomic<Bool>(false)

  private init(report: LoadClaimReport, instruments: [any LoadInstrument]) {
    self.report = report
    self.instruments = instruments
  }

  /// Reports that a claim on `key` of the loader `loader` began; `nil`, having reported nothing,
  /// when no instrument is installed.
  static func begin(loader: @autoclosure () -> String, key: some Sendable, own: (any LoadInstrument)? = nil) -> ClaimProbe? {
    guard LoadInstrumentation.isActive else { return nil }
    let instruments = LoadInstrumentation.instruments(own: own)
    guard !instruments.isEmpty else { return nil }
    let probe = ClaimProbe(
      report: LoadClaimReport(loader: loader(), key: String(describing: key), id: nextUniqueID()),
      instruments: instruments)
    for instrument in instruments { instrument.claimBegan(probe.report) }
    return probe
  }

  /// Reports the end, the first time only (a claim ends explicitly, by its deinit, or both).
  func end() {
    guard !ended.exchange(true, ordering: .relaxed) else { return }
    let duration = began.duration(to: .now)
    for instrument in instruments { instrument.claimEnded(report, duration: duration) }
  }
}

/// Reports what jobs do to the installed instruments: one atomic load when there are none.
enum JobProbe {
  /// Reports `event` of the job `job` (its identity) named `name`.
  static func report(_ event: @autoclosure () -> JobReport.Event, job: AnyObject, name: @autoclosure () -> String,
    own: (any LoadInstrument)? = nil) {
    guard LoadInstrumentation.isActive else { return }
    let instruments = LoadInstrumentation.instruments(own: own)
    guard !instruments.isEmpty else { return }
    let report = JobReport(job: name(), id: identity(of: job), event: event())
    for instrument in instruments { instrument.jobReported(report) }
  }

  /// Reports the progress when it crossed a tenth between `old` and `new`.
  static func progress(from old: Double, to new: Double, job: AnyObject, name: @autoclosure () -> String,
    own: (any LoadInstrument)? = nil) {
    guard LoadInstrumentation.isActive else { return }
    let step = (new * 10).rounded(.down)
    guard step > (old * 10).rounded(.down) else { return }
    report(.progress(step / 10), job: job, name: name(), own: own)
  }

  /// A number for the job, unique among the jobs alive (its address).
  static func identity(of job: AnyObject) -> UInt64 {
    UInt64(UInt(bitPattern: ObjectIdentifier(job).hashValue))
  }
}
