import Observation

// Observing a job: its `Observable` conformance (ObservedJobProperties), the `events` streams,
// `start(statusHandler:completion:)`, and its observers' deliveries drained outside the lock.

// MARK: - Observation

extension Job: Observable {}

extension Job {
  /// The job's events: a snapshot of its current state first, then every status change, progress
  /// step and message, in the order they happened.
  ///
  /// Each access makes a new stream whose buffer keeps the newest
  /// ``defaultEventBufferLimit`` events: a consumer that falls further behind loses the oldest,
  /// never the terminal status. Use ``events(bufferingPolicy:)`` to choose another policy. The
  /// stream finishes after the job's terminal status (at once, after the snapshot, for a finished
  /// job), or when the job is deallocated; ending the iteration removes the subscription.
  ///
  /// ```swift
  /// for await event in job.events {
  ///   switch event {
  ///   case .snapshot(let snapshot): show(snapshot)
  ///   case .status(let status): statusLabel.text = "\(status)"
  ///   case .progress(let fraction): progressView.progress = fraction
  ///   case .message(let message): log.append(message.text)
  ///   }
  /// }
  /// ```
  public var events: AsyncStream<JobEvent> { events(bufferingPolicy: .bufferingNewest(Self.defaultEventBufferLimit)) }

  /// How many events the stream of ``events`` buffers for a consumer that falls behind: 1,000.
  public static var defaultEventBufferLimit: Int { 1_000 }

  /// The job's events, as ``events`` delivers them, buffered as `bufferingPolicy` says.
  ///
  /// `.bufferingNewest(n)` keeps the newest `n` events for a slow consumer (the terminal status is
  /// never lost); `.bufferingOldest(n)` keeps the oldest and drops the rest, the end included;
  /// `.unbounded` keeps everything, so a consumer that stops reading lets it grow without bound.
  ///
  /// - Parameter bufferingPolicy: How many events to keep for a consumer that falls behind.
  /// - Returns: A new stream; its first event is a snapshot of the job.
  public func events(bufferingPolicy: AsyncStream<JobEvent>.Continuation.BufferingPolicy) -> AsyncStream<JobEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: JobEvent.self, bufferingPolicy: bufferingPolicy)
    let id = addObserver { delivery in
      switch delivery {
      case .event(let event): continuation.yield(event)
      case .checkpointSaved: break
      case .end: continuation.finish()
      }
    }
    continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
    return stream
  }

  /// Starts the job as ``start()`` does, and reports its status and result to callbacks, in the
  /// manner of ArcGIS Runtime's `AGSJob.start(statusHandler:completion:)`.
  ///
  /// `statusHandler` gets the status right after the call (the job's own status then, usually
  /// ``JobStatus/started``), then every change. `completion` runs once, after the terminal status
  /// was reported: with the output, or with the job's error. Both run outside the job's lock, one
  /// call at a time, and may call back into the job.
  ///
  /// The handlers are registered even when the job was already running; when it had already
  /// finished, they run before this method returns — unless the job's observers are being
  /// delivered to at that moment (the call is made from a handler, or another thread delivers):
  /// then they run right after the deliveries queued before them, in order, possibly after this
  /// method returned. If the job is deallocated before it finishes,
  /// `completion` gets `CancellationError`.
  ///
  /// ```swift
  /// job.start(statusHandler: { status in print("status: \(status)") }) { result in
  ///   switch result {
  ///   case .success(let output): use(output)
  ///   case .failure(let error): print(error)
  ///   }
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - statusHandler: Called with the current status and every status change.
  ///   - completion: Called once with the job's result.
  /// - Returns: Whether the job started or resumed, as ``start()`` returns it.
  @discardableResult
  public func start(
    statusHandler: (@Sendable (JobStatus) -> Void)? = nil,
    completion: @escaping @Sendable (Result<Work.Output, any Error>) -> Void
  ) -> Bool {
    let started = start()
    addObserver { delivery in
      switch delivery {
      case .event(.snapshot(let snapshot)): statusHandler?(snapshot.status)
      case .event(.status(let status)): statusHandler?(status)
      case .event, .checkpointSaved: break
      case .end(let result): completion(result ?? .failure(CancellationError()))
      }
    }
    return started
  }

  @discardableResult
  func addObserver(_ observer: @escaping Machine.Observer) -> UInt64 {
    let id = nextUniqueID()
    signals.noteAudience()  // before the snapshot reads the progress
    // A finished job's outcome is its run's; until the run holds it, the job's state keeps a copy
    // (`concluding`), which it lets go of only after. So when the state has none, the run has it:
    // read there, outside the job's lock (the run has a lock of its own).
    var drain = withState { $0.addObserver(id, observer) }
    if drain == nil {
      let runOutcome = run.knownOutcome
      assert(runOutcome != nil, "a finished job's run holds its outcome once the job's state let go of it")
      drain = withState { $0.addObserver(id, observer, runOutcome: runOutcome, lastTry: true) }
    }
    // The first delivery is user code, as every delivery is: outside any attempt (see `carryOut`).
    if drain == true { AttemptContext.outside { drainObservers() } }
    return id
  }

  func removeObserver(_ id: UInt64) {
    let removed = state.withLock(owner: self) { $0.removeObserver(id) }
    _ = consume removed  // the handler and its pending deliveries go after the lock
  }

  /// Delivers pending events until there are none; only one caller drains at a time, so every
  /// observer gets its events in order.
  func drainObservers() {
    while let batch = state.withLock(owner: self, { $0.takeDeliveries() }) {
      for (observer, delivery) in batch { observer(delivery) }
    }
  }

  /// Tells the `ObservationRegistrar` what a transition changed, outside the lock.
  func notifyObservation(of changes: JobChanges) {
    guard !changes.isEmpty else { return }
    if changes.contains(.status) { registrar.withMutation(of: ObservedJobProperties.shared, keyPath: ObservedJobProperties.status) {} }
    if changes.contains(.progress) { registrar.withMutation(of: ObservedJobProperties.shared, keyPath: ObservedJobProperties.fractionCompleted) {} }
    if changes.contains(.messages) { registrar.withMutation(of: ObservedJobProperties.shared, keyPath: ObservedJobProperties.messages) {} }
    if changes.contains(.error) { registrar.withMutation(of: ObservedJobProperties.shared, keyPath: ObservedJobProperties.error) {} }
  }
}

/// The observable properties of every ``Job``, named by key paths that are not generic, for the
/// reason given on `ObservedProperties`: a key path into the generic `Job<Work>` is rebuilt by the
/// runtime on every use inside the library, which made each progress report cost ~20,000
/// instructions.
final class ObservedJobProperties: Observable, Sendable {
  static let shared = ObservedJobProperties()
  static let status = \ObservedJobProperties.status
  static let fractionCompleted = \ObservedJobProperties.fractionCompleted
  static let messages = \ObservedJobProperties.messages
  static let error = \ObservedJobProperties.error

  var status: Void { () }
  var fractionCompleted: Void { () }
  var messages: Void { () }
  var error: Void { () }
}
