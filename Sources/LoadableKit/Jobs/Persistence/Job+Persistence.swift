import Foundation

// A job's JSON form: `toJSON()`, and `fromJSON(_:)` that restores a job from it (the schema and
// the rules for reading it are in JobJSON.swift).

// MARK: - JSON persistence

extension Job {
  /// Encodes the job: its kind, parameters, status, latest checkpoint, progress and messages.
  ///
  /// Works in every status and records the checkpoint saved last at the moment of the call. To
  /// save a running job exactly at a checkpoint, ``pause()`` it and await ``waitUntilParked()``
  /// first. Outputs are not encoded. The format is described in <doc:Jobs>.
  ///
  /// - Returns: UTF-8 JSON with sorted keys.
  /// - Throws: ``JobError`` with ``JobError/Code/encodingFailed`` when the work or its checkpoint
  ///   does not encode.
  public func toJSON() throws -> Data {
    try encodeJSON().data
  }

  /// The JSON form and the generation of the checkpoint it holds, read in one step; a
  /// ``JobManager``'s record also holds the job's place in the manager, `addedSequence`.
  func encodeJSON(addedSequence: Int? = nil) throws -> (data: Data, generation: UInt64) {
    let (snapshot, (checkpoint, limit, generation)) = readSnapshot { state in
      (state.checkpoint, state.messageLog.limit, state.checkpointGeneration)
    }
    let envelope = JobEnvelope(
      schemaVersion: JobJSON.schemaVersion, kind: Work.kind, parameters: work, status: snapshot.status,
      checkpoint: checkpoint, fractionCompleted: snapshot.fractionCompleted, messages: snapshot.messages,
      messageLimit: limit, droppedMessageCount: snapshot.droppedMessageCount,
      error: snapshot.error.map(PersistedJobError.init), addedSequence: addedSequence)
    do {
      return (try JobJSON.encoder().encode(envelope), generation)
    } catch {
      throw JobError(code: .encodingFailed, message: "the job could not be encoded: \(error)", underlyingError: error)
    }
  }

  /// Restores a job from the JSON that ``toJSON()`` made, with default ``JobOptions``.
  ///
  /// A job that never started comes back ``JobStatus/notStarted``; one that had started comes back
  /// ``JobStatus/paused`` with its checkpoint, and ``start()`` runs its work again from there. A
  /// finished job comes back in its terminal state (one that was being cancelled comes back
  /// ``JobStatus/failed`` with `CancellationError`): ``start()`` returns `false`, and ``output``
  /// throws ``JobError/Code/outputNotPersisted``.
  ///
  /// - Parameter data: The job's JSON form.
  /// - Returns: The restored job.
  /// - Throws: ``JobError`` with ``JobError/Code/truncated``, ``JobError/Code/malformed``,
  ///   ``JobError/Code/unsupportedSchemaVersion`` or ``JobError/Code/kindMismatch``.
  public static func fromJSON(_ data: Data) throws -> Job<Work> {
    try fromJSON(data, options: JobOptions())
  }

  /// Restores a job from its JSON form, as ``fromJSON(_:)`` does, with `options`.
  public static func fromJSON(_ data: Data, options: JobOptions) throws -> Job<Work> {
    let envelope = try JobJSON.decode(data, as: Work.self)
    let notPersisted = JobError(
      code: .outputNotPersisted,
      message: "the job was restored after it finished (\(envelope.status.rawValue)); outputs are not persisted")
    let machine: Machine
    // A job restored after it finished has its outcome at once (its run's: `output` throws it).
    let outcome: Result<Work.Output, any Error>?
    // The job keeps the limit it was saved with; JSON written before there was one gets the options'.
    let messages = JobMessageLog(
      limit: envelope.messageLimit ?? options.messageLimit, messages: envelope.messages,
      droppedCount: envelope.droppedMessageCount ?? 0)
    switch envelope.status {
    case .notStarted, .started, .paused:
      machine = Machine(
        status: envelope.status == .notStarted ? .notStarted : .paused, checkpoint: envelope.checkpoint,
        messages: messages, progress: envelope.fractionCompleted)
      outcome = nil
    case .succeeded:
      machine = Machine(
        status: .succeeded, checkpoint: envelope.checkpoint, messages: messages, progress: 1)
      outcome = .failure(notPersisted)
    case .canceling, .failed:
      let error =
        envelope.status == .canceling
        ? CancellationError()
        : envelope.error?.restored ?? JobError(code: .workFailed, message: "the job failed; no error was recorded")
      machine = Machine(
        status: .failed, checkpoint: envelope.checkpoint, messages: messages, error: error,
        progress: envelope.fractionCompleted)
      outcome = .failure(notPersisted)
    }
    return Job(restoring: envelope.parameters, options: options, machine: machine, outcome: outcome)
  }
}
