/// How a ``Job`` treats errors: which ones are transient, how long it waits between retries, and
/// for how long it keeps retrying.
///
/// A transient error (a dropped connection, a server that is briefly busy) does not fail the job:
/// the job waits for the ``backoff`` delay on ``clock`` and runs ``JobWork/run(in:)`` again from the
/// last checkpoint. The ``transientWindow`` starts at the first error of a run of transient errors
/// and starts again once the work saves a new checkpoint, so a job that makes progress between
/// failures keeps going. When the errors outlast the window, the job posts a message saying the
/// connection was lost and fails with ``JobError/Code/connectionLost``.
///
/// ```swift
/// let options = JobOptions(
///   isTransient: { ($0 as? URLError)?.code == .networkConnectionLost },
///   backoff: .exponential(initial: .seconds(2), maximum: .seconds(30)))
/// let job = Job(DownloadTiles(tiles: tiles), options: options)
/// ```
///
/// Tests pass a test clock (such as `LoadableKitTesting.TestClock`) to move through the window
/// without waiting.
public struct JobOptions: Sendable {
  /// The delays between the retries of a run of transient errors: the one ``LoadableKit/Backoff``
  /// type, which a loadable's ``RetryPolicy`` uses too.
  public typealias Backoff = LoadableKit.Backoff

  /// Whether an error that ``JobWork/run(in:)`` threw is transient and worth a retry.
  ///
  /// Called outside the job's lock, once per error. `CancellationError` is never retried. The
  /// default treats no error as transient.
  public var isTransient: @Sendable (any Error) -> Bool
  /// The delays between retries.
  public var backoff: Backoff
  /// How long a run of transient errors may last before the job fails with
  /// ``JobError/Code/connectionLost``; 10 minutes by default. `.zero` disables retries.
  public var transientWindow: Duration
  /// The clock the job waits on between retries and measures the window with.
  public var clock: any Clock<Duration>
  /// The most messages a job keeps; 1,000 by default.
  ///
  /// Past the limit the oldest messages are dropped and counted in ``Job/droppedMessageCount``, so
  /// a job that retries a transient error at once, thousands of times a second, stays bounded. A
  /// limit of zero keeps no message; a negative one counts as zero. The limit is saved in the job's
  /// JSON form, and a restored job keeps it.
  public var messageLimit: Int
  /// An instrument told about the job's status changes, messages and tenths of progress, before
  /// the process-wide one (see <doc:ObservingLoadables>); `nil`, the default, for none. Give it to
  /// ``JobRegistry/register(_:options:)`` for the jobs a ``JobManager`` restores. Not saved in the
  /// JSON form.
  public var instrument: (any LoadInstrument)? {
    didSet { if instrument != nil { LoadInstrumentation.noteObjectInstrument() } }
  }

  /// Creates options.
  ///
  /// - Parameters:
  ///   - isTransient: Whether an error is transient; by default none is.
  ///   - backoff: The delays between retries; by default 1 s doubling up to 60 s.
  ///   - transientWindow: How long transient errors may go on; 10 minutes by default.
  ///   - clock: The clock to wait on; a `ContinuousClock` by default.
  ///   - messageLimit: The most messages a job keeps; 1,000 by default.
  ///   - instrument: An instrument for the job's reports; none by default.
  public init(
    isTransient: @escaping @Sendable (any Error) -> Bool = { _ in false },
    backoff: Backoff = .exponential(),
    transientWindow: Duration = .seconds(600),
    clock: any Clock<Duration> = ContinuousClock(),
    messageLimit: Int = 1_000,
    instrument: (any LoadInstrument)? = nil
  ) {
    self.messageLimit = messageLimit
    self.instrument = instrument
    if instrument != nil { LoadInstrumentation.noteObjectInstrument() }
    self.isTransient = isTransient
    self.backoff = backoff
    self.transientWindow = transientWindow
    self.clock = clock
  }
}
