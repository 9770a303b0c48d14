/// A ``ContentLoader`` claim, as an instrument hears of it (see ``LoadInstrument``).
public struct LoadClaimReport: Sendable, CustomStringConvertible {
  /// The loader's name.
  public var loader: String
  /// The key, described.
  public var key: String
  /// A number unique within the process, the same in the began and ended reports of one claim.
  public var id: UInt64

  /// Creates a report.
  public init(loader: String, key: String, id: UInt64) {
    self.loader = loader
    self.key = key
    self.id = id
  }

  /// The key's loadable name, such as `"thumbnails[42]"`.
  public var description: String { "\(loader)[\(key)]" }
}

/// Something a job did, as an instrument hears of it (see ``LoadInstrument``).
public struct JobReport: Sendable, CustomStringConvertible {
  /// What happened.
  public enum Event: Sendable {
    /// The job changed status.
    case status(JobStatus)
    /// The job posted a message (its work, or the job itself on a transient error).
    case message(JobMessage)
    /// The job's progress crossed a tenth: 0.1, 0.2, … 1.0.
    case progress(Double)
  }

  /// The job's name: its ``JobWork/kind``, unless it was given one.
  public var job: String
  /// A number unique within the process for each job.
  public var id: UInt64
  /// What happened.
  public var event: Event

  /// Creates a report.
  public init(job: String, id: UInt64, event: Event) {
    self.job = job
    self.id = id
    self.event = event
  }

  /// The job and the event, such as `"download #3: status started"`.
  public var description: String {
    switch event {
    case .status(let status): "\(job) #\(id): status \(status.rawValue)"
    case .message(let message): "\(job) #\(id): message \(message.text)"
    case .progress(let fraction): "\(job) #\(id): progress \(fraction)"
    }
  }
}
