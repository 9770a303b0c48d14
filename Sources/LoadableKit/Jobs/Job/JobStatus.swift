/// Where a ``Job`` is in its lifecycle.
///
/// ```
/// notStarted ──start()──▶ started ──the work returns──▶ succeeded
///      │                   │  ▲  └───the work throws───▶ failed
///      │           pause() ▼  │ start()                   ▲
///      │                  paused ──cancel()──▶ canceling ─┤ (the work stopped)
///      └──────────────────cancel()────────────────────────┘
/// ```
///
/// ``succeeded`` and ``failed`` are terminal: a finished job never runs again. A job that was
/// cancelled ends ``failed`` with `CancellationError`.
///
/// The raw values are the strings stored in a job's JSON form (see <doc:Jobs>).
public enum JobStatus: String, Sendable, Codable, Hashable {
  /// The job was created and has not been started.
  case notStarted
  /// The work is running (or about to run again after a transient error).
  case started
  /// ``Job/pause()`` was called: the work parks at its next ``JobContext/pausePoint()``.
  /// A job restored from JSON after it started also comes back paused.
  case paused
  /// ``Job/cancel()`` was called and the job waits for its work to stop.
  case canceling
  /// The work returned its output. Terminal.
  case succeeded
  /// The work threw, the job was cancelled, or a transient failure outlasted its window.
  /// ``Job/error`` says why. Terminal.
  case failed

  /// Whether the status is ``succeeded`` or ``failed``: the job will never run again.
  public var isFinished: Bool { self == .succeeded || self == .failed }
}
