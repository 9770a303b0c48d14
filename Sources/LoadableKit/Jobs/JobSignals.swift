import Synchronization

/// The lock-free part of a job's state, shared by the ``Job`` and its ``JobContext``s so that the
/// per-item calls (``JobContext/reportProgress(completed:total:)`` and
/// ``JobContext/pausePoint()``) are inlined into the work and touch no lock, no generic metadata
/// and no allocation while the job runs.
@usableFromInline
final class JobSignals: Sendable {
  /// The fraction completed as the bit pattern of a non-negative `Double`, whose order is the
  /// order of the values: an atomic `max` keeps it monotonic without a lock.
  @usableFromInline let progressBits: Atomic<UInt64>
  /// `true` exactly while the status is `.started`; written under the job's lock.
  @usableFromInline let gate = Atomic<Bool>(false)

  init(progress: Double) {
    progressBits = Atomic(progress.bitPattern)
  }

  /// Whether the job is ``JobStatus/started``, so a pause point may return at once.
  @inlinable
  var isRunning: Bool { gate.load(ordering: .acquiring) }

  var progress: Double { Double(bitPattern: progressBits.load(ordering: .relaxed)) }

  /// Raises the progress to `fraction` (clamped to 0…1; NaN counts as 0). Returns `true` when it
  /// crossed a step of 1/1000, so observers should hear of it.
  @inlinable
  func raiseProgress(to fraction: Double) -> Bool {
    let bits = (fraction > 0 ? min(fraction, 1) : 0).bitPattern
    let old = progressBits.load(ordering: .relaxed)
    guard bits > old else { return false }
    let previous = progressBits.max(bits, ordering: .relaxed).oldValue
    return bits > previous && Self.step(bits) > Self.step(previous)
  }

  @inlinable
  static func step(_ bits: UInt64) -> Int {
    Int(Double(bitPattern: bits) * 1000)
  }
}
