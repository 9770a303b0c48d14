import Synchronization

/// The lock-free part of a job's state, shared by the ``Job`` and its ``JobContext``s so that the
/// per-item calls (``JobContext/reportProgress(completed:total:)`` and
/// ``JobContext/pausePoint()``) are inlined into the work and touch no lock, no generic metadata
/// and no allocation while the job runs.
///
/// A progress report that crosses a step of 1/1000 is published (observers and observation are
/// told, under the job's lock) only when somebody may listen: an observer of the job's events, a
/// reader of an observable property, or an installed instrument (``needsPublishing``). Until then
/// the progress lives in the atomic alone, and reading or subscribing finds it there.
@usableFromInline
final class JobSignals: Sendable {
  /// The fraction completed as the bit pattern of a non-negative `Double`, whose order is the
  /// order of the values: an atomic `max` keeps it monotonic without a lock.
  @usableFromInline let progressBits: Atomic<UInt64>
  /// `true` exactly while the status is `.started`; written under the job's lock.
  @usableFromInline let gate = Atomic<Bool>(false)
  /// Set, once and for good, when somebody may want to hear of progress: an observer was added
  /// or an observable property was read. See ``needsPublishing``.
  let audience = Atomic<Bool>(false)

  init(progress: Double) {
    progressBits = Atomic(progress.bitPattern)
  }

  /// Whether the job is ``JobStatus/started``, so a pause point may return at once.
  @inlinable
  var isRunning: Bool { gate.load(ordering: .acquiring) }

  var progress: Double { Double(bitPattern: progressBits.load(ordering: .sequentiallyConsistent)) }

  /// Notes that somebody may listen to progress from now on. Called before the listener reads the
  /// progress (both sequentially consistent, as the report's raise and its ``needsPublishing``
  /// are), so a report either sees the listener or raised the progress the listener then reads.
  func noteAudience() {
    if audience.load(ordering: .relaxed) { return }
    audience.store(true, ordering: .sequentiallyConsistent)
  }

  /// Whether a report that crossed a step must be published: somebody may listen (an observer, a
  /// reader of an observable property) or an instrument is installed. Not inlinable, and not
  /// generic: one call and two atomic loads, on one report in a step.
  @usableFromInline
  func needsPublishing() -> Bool {
    audience.load(ordering: .sequentiallyConsistent) || LoadInstrumentation.isActive
  }

  /// Raises the progress to `fraction` (clamped to 0…1; NaN counts as 0). Returns `true` when it
  /// crossed a step of 1/1000, so observers should hear of it.
  @inlinable
  func raiseProgress(to fraction: Double) -> Bool {
    let bits = (fraction > 0 ? min(fraction, 1) : 0).bitPattern
    let old = progressBits.load(ordering: .relaxed)
    guard bits > old else { return false }
    let previous = progressBits.max(bits, ordering: .sequentiallyConsistent).oldValue
    return bits > previous && Self.step(bits) > Self.step(previous)
  }

  @inlinable
  static func step(_ bits: UInt64) -> Int {
    Int(Double(bitPattern: bits) * 1000)
  }
}
