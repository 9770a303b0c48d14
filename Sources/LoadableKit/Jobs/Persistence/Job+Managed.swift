import Foundation

// The side of a job that a JobManager uses (ManageableJob): its JSON form for the store, the
// durability barrier, and an observer that also hears of checkpoints.

/// What a ``JobManager`` hears from a job it holds.
enum ManagedJobDelivery: Sendable {
  case event(JobEvent)
  case checkpointSaved
  case end
}

/// The side of a ``Job`` that a ``JobManager`` uses: its JSON form with the checkpoint generation
/// it holds, the durability barrier, and an observer that also hears of checkpoints.
protocol ManageableJob: JobHandle {
  /// The JSON form (or why it does not encode) with the job's place in its manager, and the
  /// generation of the checkpoint in it, read in one step.
  func persistentForm(addedSequence: Int) -> (data: Result<Data, JobError>, generation: UInt64)
  /// A manager takes the job under `id` (or lets it go, with `nil`); `false` when another manager
  /// holds it.
  func claimManagedID(_ id: String?) -> Bool
  func requireDurability(_ required: Bool)
  func markDurable(_ generation: UInt64)
  func addManagerObserver(_ handler: @escaping @Sendable (ManagedJobDelivery) -> Void) -> UInt64
  func removeManagerObserver(_ id: UInt64)
}

extension Job: ManageableJob {
  func persistentForm(addedSequence: Int) -> (data: Result<Data, JobError>, generation: UInt64) {
    let generation = state.withLock(owner: self) { $0.checkpointGeneration }
    do {
      let (data, encoded) = try encodeJSON(addedSequence: addedSequence)
      return (.success(data), encoded)
    } catch let error as JobError {
      return (.failure(error), generation)
    } catch {
      return (.failure(JobError(code: .encodingFailed, message: "\(error)", underlyingError: error)), generation)
    }
  }

  func claimManagedID(_ id: String?) -> Bool {
    state.withLock(owner: self) { $0.claimManagedID(id) }
  }

  func requireDurability(_ required: Bool) {
    perform(withState { $0.requireDurability(required) })
  }

  func markDurable(_ generation: UInt64) {
    perform(withState { $0.markDurable(generation) })
  }

  func addManagerObserver(_ handler: @escaping @Sendable (ManagedJobDelivery) -> Void) -> UInt64 {
    addObserver { delivery in
      switch delivery {
      case .event(let event): handler(.event(event))
      case .checkpointSaved: handler(.checkpointSaved)
      case .end: handler(.end)
      }
    }
  }

  func removeManagerObserver(_ id: UInt64) {
    removeObserver(id)
  }
}
