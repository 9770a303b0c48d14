import Synchronization

/// Reports one ``ContentLoader`` claim, began and ended, to the instruments installed when it
/// began. Made only when some instrument is installed: one atomic load otherwise.
@usableFromInline
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
    LoadInstrumentation.tell(instruments) { instrument in instrument.claimBegan(probe.report) }
    return probe
  }

  /// Reports the end, the first time only (a claim ends explicitly, by its deinit, or both).
  @usableFromInline
  func end() {
    guard !ended.exchange(true, ordering: .relaxed) else { return }
    let duration = began.duration(to: .now)
    LoadInstrumentation.tell(instruments) { instrument in instrument.claimEnded(report, duration: duration) }
  }
}

/// Reports what jobs do to the installed instruments. A job's state machine collects the events
/// only while some instrument is installed (one atomic load each otherwise), and the job reports
/// them after releasing its lock.
enum JobProbe {
  /// Reports `events` of the job `job` (its identity) named `name`, in order.
  static func report(
    _ events: [JobReport.Event], job: AnyObject, name: @autoclosure () -> String, own: (any LoadInstrument)?
  ) {
    let instruments = LoadInstrumentation.instruments(own: own)
    guard !instruments.isEmpty else { return }
    let name = name()
    let id = identity(of: job)
    for event in events {
      let report = JobReport(job: name, id: id, event: event)
      for instrument in instruments { instrument.jobReported(report) }
    }
  }

  /// The highest tenth of progress (0.1 … 1.0) reached going from `old` to `new`, if one was.
  static func tenthCrossed(from old: Double, to new: Double) -> Double? {
    let step = (new * 10).rounded(.down)
    return step > (old * 10).rounded(.down) ? step / 10 : nil
  }

  /// A number for the job, unique among the jobs alive (its address).
  static func identity(of job: AnyObject) -> UInt64 {
    UInt64(UInt(bitPattern: ObjectIdentifier(job).hashValue))
  }
}

extension JobReport.Event {
  /// The instrument's event for a job's status change or message; progress is reported by tenths
  /// (``JobProbe/tenthCrossed(from:to:)``), and snapshots not at all.
  init?(_ event: JobEvent) {
    switch event {
    case .status(let status): self = .status(status)
    case .message(let message): self = .message(message)
    case .progress, .snapshot: return nil
    }
  }
}
