import Foundation
import Observation
import Synchronization

/// Holds the jobs of an app, stores each of them on every change, and restores them all when the
/// app starts again, in the manner of the ArcGIS Maps SDK toolkit's `JobManager`.
///
/// A manager knows the work types it may restore from its ``JobRegistry``. It writes a job's JSON
/// form to its ``JobStore`` when the job is added, at each status change and each checkpoint, and
/// at most once per `saveInterval` (on the injected clock) for progress and messages. A job's
/// work does not go past its next ``JobContext/pausePoint()`` before its last checkpoint is
/// stored, so after a crash at any instant it resumes from the last checkpoint it passed, and at
/// most the unit in flight runs again.
///
/// ```swift
/// var registry = JobRegistry()
/// registry.register(DownloadTiles.self)
/// let manager = try JobManager(registry: registry, directory: jobsDirectory)
/// for problem in manager.restoreProblems { log(problem) }     // files it could not restore
/// manager.resumeAll()                                          // restored jobs come back paused
/// let job = Job(DownloadTiles(area: "Redlands", tileCount: 400))
/// try manager.add(job)
/// job.start()
/// ```
///
/// Creating a manager restores every job in the store, in the order they were added: unfinished
/// jobs come back ``JobStatus/paused`` (``JobStatus/notStarted`` if they never started), finished
/// ones in their terminal state. Records it cannot restore are reported in ``restoreProblems`` and the other
/// jobs load all the same.
///
/// ``jobs`` is observable, and ``events`` reports additions, removals, every job's changes and
/// failed saves. The manager holds its jobs strongly until they are removed.
public final class JobManager: @unchecked Sendable {
  /// The work types the manager restores.
  public let registry: JobRegistry
  /// Where the jobs are kept.
  public let store: any JobStore
  /// The clock that spaces the saves of progress and messages.
  public let clock: any Clock<Duration>
  /// The shortest time between two saves of a job caused by progress or messages alone.
  public let saveInterval: Duration
  /// The records found in the store at creation that could not be restored.
  public let restoreProblems: [JobRestoreProblem]

  private let state = Mutex(State())
  private let registrar = ObservationRegistrar()

  private struct State {
    var entries: [Entry] = []
    /// The place the next job added gets: one more than every place held so far.
    var nextSequence = 0
    /// The ids of the records left in place at the restore (``restoreProblems`` not set aside):
    /// no job is added under them, which would overwrite them.
    var idsLeftInPlace: Set<String> = []
    /// The ids of jobs removed whose records are not deleted yet (a save of the job may be in
    /// progress): no job is added under them until ``remove(id:)`` returns.
    var idsBeingRemoved: Set<String> = []
    var eventContinuations: [UInt64: AsyncStream<JobManagerEvent>.Continuation] = [:]
  }

  /// One job and the state of its saves.
  final class Entry: Sendable {
    let id: String
    let job: any ManageableJob
    /// The job's place in the manager, stored in its record (`addedSequence`) so that a restore
    /// brings the jobs back in the order they were added.
    let sequence: Int
    let writer = Mutex(Writer())
    init(id: String, job: any ManageableJob, sequence: Int) {
      self.id = id
      self.job = job
      self.sequence = sequence
    }

    /// How many callers of ``JobManager/remove(id:)`` wait for the record's deletion, for tests.
    var removalWaiterCountForTesting: Int { writer.withLock(owner: self) { $0.removalWaiters.count } }
  }

  /// The entry of job `id`, or `nil`.
  func entry(id: String) -> Entry? {
    state.withLock(owner: self) { $0.entries.first { $0.id == id } }
  }

  struct Writer {
    var observerID: UInt64 = 0
    /// Whether ``JobManager/events`` reported the job's addition: until then the job's events
    /// wait here (in order: one thread delivers a job's events at a time), so that none comes
    /// before its `.added`. A restored job is reported from the start.
    var announced = false
    var early: [JobEvent] = []
    /// A ``JobManager/remove(id:)`` took the job out before its addition was reported: the add
    /// reports the removal after the addition and the job's events held for it.
    var removedBeforeAnnounced = false

    /// Holds `event` until the addition is reported, within ``JobManager/defaultEventBufferLimit``
    /// events: a progress report replaces the one before it, and past the limit the oldest event
    /// other than a status change goes (as the stream drops its oldest). Returns the event let go.
    mutating func hold(_ event: JobEvent) -> JobEvent? {
      if case .progress = event, let last = early.last, case .progress = last {
        early[early.count - 1] = event
        return last
      }
      early.append(event)
      guard early.count > JobManager.defaultEventBufferLimit else { return nil }
      let index = early.firstIndex { if case .status = $0 { false } else { true } } ?? 0
      return early.remove(at: index)
    }
    /// One writer at a time; a save asked for while it writes makes it write once more.
    var writing = RunAgainFlag()
    var isFlushScheduled = false
    var isRemoved = false
    /// How the record's deletion went (`.some(nil)`: deleted), once a pass made it. The store is not
    /// asked again: by then the id may name the record of a job added since under it.
    var deletion: (any Error)??
    /// Callers of ``JobManager/remove(id:)`` waiting until the record is deleted — by the write
    /// in progress on another thread when they came — with the deletion's error, if any.
    var removalWaiters = WaiterStore<UnsafeContinuation<(any Error)?, Never>>()
  }

  /// Creates a manager over `store` and restores every job in it.
  ///
  /// - Parameters:
  ///   - registry: The work types the manager may hold and restore.
  ///   - store: Where the jobs are kept.
  ///   - clock: The clock that spaces saves of progress and messages; a `ContinuousClock` by default.
  ///   - saveInterval: The shortest time between two saves for progress or messages alone; 1 s by default.
  /// - Throws: ``JobError`` when the store as a whole cannot be read.
  public init(
    registry: JobRegistry, store: any JobStore, clock: any Clock<Duration> = ContinuousClock(),
    saveInterval: Duration = .seconds(1)
  ) throws {
    self.registry = registry
    self.store = store
    self.clock = clock
    self.saveInterval = saveInterval
    var problems: [JobRestoreProblem] = []
    var found: [(id: String, job: any ManageableJob, sequence: Int?)] = []
    for record in try store.loadAll() {
      do {
        let data = try record.data.get()
        guard let job = try registry.job(fromJSON: data) as? any ManageableJob else { continue }
        found.append((record.id, job, JobJSON.addedSequence(of: data)))
      } catch let error as JobError {
        let setAside = error.code == .truncated || error.code == .malformed
        var moved = false
        if setAside {
          moved = (try? store.setAside(id: record.id)) != nil
        }
        problems.append(JobRestoreProblem(id: record.id, error: error, wasSetAside: moved))
      } catch {
        problems.append(
          JobRestoreProblem(
            id: record.id, error: JobError(code: .malformed, message: "\(error)", underlyingError: error),
            wasSetAside: false))
      }
    }
    restoreProblems = problems
    // The order the jobs were added in; records written before the manager kept it come after, in
    // the store's order, and get their places now (they are stored again with them below).
    let ordered = found.enumerated().sorted { a, b in
      switch (a.element.sequence, b.element.sequence) {
      case let (x?, y?): x != y ? x < y : a.offset < b.offset
      case (_?, nil): true
      case (nil, _?): false
      case (nil, nil): a.offset < b.offset
      }
    }.map(\.element)
    // Only the order counts: places beyond what adding jobs ever reaches (a record another app
    // wrote) are numbered again, in order, and stored again with them, so that the next place
    // never overflows.
    let highest = ordered.compactMap(\.sequence).max()
    let renumbered = (highest ?? 0) > Int.max / 2
    var next = renumbered ? 0 : (highest ?? -1) + 1
    var restored: [Entry] = []
    var unplaced: [Entry] = []
    for (id, job, stored) in ordered {
      _ = job.claimManagedID(id)  // a job restored here: no other manager holds it
      let sequence = renumbered ? nil : stored
      let entry = Entry(id: id, job: job, sequence: sequence ?? next)
      if sequence == nil {
        next += 1
        unplaced.append(entry)
      }
      restored.append(entry)
    }
    let leftInPlace = Set(problems.lazy.filter { !$0.wasSetAside }.map(\.id))
    state.withLock(owner: self) { [next] state in
      state.entries = restored
      state.nextSequence = next
      state.idsLeftInPlace = leftInPlace
    }
    for entry in restored {
      entry.writer.withLock(owner: entry) { $0.announced = true }
      adopt(entry)
    }
    for entry in unplaced { save(entry) }
  }

  /// Creates a manager over a ``DirectoryJobStore`` in `directory` and restores every job in it.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/storeLocked`` when another manager holds the
  ///   directory, or ``JobError/Code/storeFailed`` when it cannot be created or read.
  public convenience init(
    registry: JobRegistry, directory: URL, clock: any Clock<Duration> = ContinuousClock(),
    saveInterval: Duration = .seconds(1)
  ) throws {
    try self.init(registry: registry, store: DirectoryJobStore(directory: directory), clock: clock, saveInterval: saveInterval)
  }

  deinit {
    let (entries, continuations) = state.withLock(owner: self) { state in
      (state.entries, Array(state.eventContinuations.values))
    }
    for entry in entries { release(entry) }
    for continuation in continuations { continuation.finish() }
  }

  // MARK: - The jobs

  /// The jobs the manager holds, in the order they were added, also after a restore. Observable.
  public var jobs: [ManagedJob] {
    registrar.access(self, keyPath: \.jobs)
    return state.withLock(owner: self) { $0.entries.map { ManagedJob(id: $0.id, job: $0.job) } }
  }

  /// The job with identifier `id`, or `nil`.
  public func job(id: String) -> (any JobHandle)? {
    entry(id: id)?.job
  }

  /// The job with identifier `id` as a `Job<Work>`, or `nil` when there is none or its work is of
  /// another type: its output and checkpoint without a cast.
  public func job<Work: JobWork>(id: String, as type: Work.Type) -> Job<Work>? {
    job(id: id) as? Job<Work>
  }

  /// Adds `job` to the manager under an identifier the manager chooses (a UUID) and stores it at
  /// once.
  ///
  /// - Parameter job: A ``Job`` of a kind registered in ``registry``, in any status.
  /// - Returns: The job with its identifier in the manager.
  /// - Throws: ``JobError`` with ``JobError/Code/unknownKind`` when its kind is not registered (it
  ///   could not be restored), ``JobError/Code/unknownJob`` when a manager already holds it or it is
  ///   not a ``Job``, or the store's error when the first save fails (the job is not added then).
  @discardableResult
  public func add(_ job: any JobHandle) throws -> ManagedJob {
    try add(job, id: UUID().uuidString)
  }

  /// Adds `job` to the manager under the identifier `id` that the app chose, and stores it at
  /// once.
  ///
  /// The identifier names the job's record in the store (``DirectoryJobStore``: the file
  /// `<id>.json`), and the job knows it (``Job/managedID``); it comes back with the job after a
  /// restore.
  ///
  /// ```swift
  /// try manager.add(Job(DownloadTiles(area: "Redlands")), id: "tiles-redlands")
  /// let job = manager.job(id: "tiles-redlands", as: DownloadTiles.self)
  /// ```
  ///
  /// - Parameters:
  ///   - job: A ``Job`` of a kind registered in ``registry``, in any status.
  ///   - id: The job's identifier in the manager; it must name a record in the store (for a
  ///     ``DirectoryJobStore``: not empty, no `/`, not starting with `.`).
  /// - Returns: The job with its identifier in the manager.
  /// - Throws: ``JobError`` with ``JobError/Code/duplicateID`` when the manager holds a job with
  ///   that identifier, is removing one (until its ``remove(id:)`` returns), or left a record with
  ///   it in place (one of ``restoreProblems`` not set aside), ``JobError/Code/unknownKind`` when
  ///   its kind is not registered,
  ///   ``JobError/Code/unknownJob`` when a manager already holds the job or it is not a ``Job``,
  ///   or the store's error when the first save fails (``JobError/Code/storeFailed`` for an
  ///   identifier the store cannot name). The job is not added then.
  @discardableResult
  public func add(_ job: any JobHandle, id: String) throws -> ManagedJob {
    guard registry.kinds.contains(job.kind) else {
      throw JobError(code: .unknownKind, message: "no work type is registered for the kind \"\(job.kind)\"")
    }
    guard let job = job as? any ManageableJob else {
      throw JobError(code: .unknownJob, message: "only a Job can be managed")
    }
    guard job.claimManagedID(id) else {
      throw JobError(code: .unknownJob, message: "a job manager already holds this job (as \"\(job.managedID ?? "")\")")
    }
    let added = state.withLock(owner: self) { state -> Result<Entry, JobError> in
      guard !state.entries.contains(where: { $0.id == id }) else {
        return .failure(JobError(code: .duplicateID, message: "the manager already holds a job \"\(id)\""))
      }
      guard !state.idsBeingRemoved.contains(id) else {
        return .failure(
          JobError(code: .duplicateID, message: "the job \"\(id)\" is being removed: its record is not deleted yet"))
      }
      guard !state.idsLeftInPlace.contains(id) else {
        return .failure(
          JobError(
            code: .duplicateID,
            message: "the record \"\(id)\", which the manager could not restore, is left in place (restoreProblems)"))
      }
      let entry = Entry(id: id, job: job, sequence: state.nextSequence)
      state.nextSequence += 1
      state.entries.append(entry)
      return .success(entry)
    }
    let entry: Entry
    switch added {
    case .success(let added): entry = added
    case .failure(let error):
      _ = job.claimManagedID(nil)
      throw error
    }
    // Watch first, then save: a checkpoint the work saves meanwhile is in this save or the next,
    // and its pause points wait for it either way.
    adopt(entry)
    do {
      try write(entry)
    } catch {
      state.withLock(owner: self) { $0.entries.removeAll { $0 === entry } }
      release(entry)
      // The list held the job meanwhile: a tracker that read it then must hear that it is gone.
      registrar.withMutation(of: self, keyPath: \.jobs) {}
      throw error as? JobError ?? JobError(code: .storeFailed, message: "\(error)", underlyingError: error)
    }
    registrar.withMutation(of: self, keyPath: \.jobs) {}
    emit(.added(id: entry.id))
    // Then the job's events that came meanwhile, until none is left: later ones go out directly.
    // A removal that came meanwhile is reported last.
    while true {
      let (early, removed) = entry.writer.withLock(owner: entry) { writer -> ([JobEvent], Bool) in
        if writer.early.isEmpty { writer.announced = true }
        defer { writer.early = [] }
        return (writer.early, writer.early.isEmpty && writer.removedBeforeAnnounced)
      }
      if early.isEmpty {
        if removed { emit(.removed(id: entry.id)) }
        break
      }
      for event in early { emit(.job(id: entry.id, event)) }
    }
    return ManagedJob(id: entry.id, job: job)
  }

  /// Resumes every ``JobStatus/paused`` job, as the toolkit's `resumeAllPausedJobs()` does.
  ///
  /// - Returns: How many jobs resumed.
  @discardableResult
  public func resumeAll() -> Int {
    jobs.reduce(0) { count, managed in managed.job.status == .paused && managed.job.start() ? count + 1 : count }
  }

  /// Pauses every running job, waits until each one's work is parked at a pause point, and
  /// stores them all, so each is saved exactly at its last checkpoint.
  ///
  /// It returns as soon as each job is at a point it can be stored from, so the wait is bounded
  /// by the longest unit of work in flight: a job waiting out a transient-error backoff, and a
  /// server job waiting for its next poll (``ServerJobRunner``), count as parked, and the delay
  /// is not waited out. Call it when the app goes to the background.
  nonisolated(nonsending) public func pauseAll() async {
    let entries = state.withLock(owner: self) { $0.entries }
    for entry in entries { entry.job.pause() }
    for entry in entries { await entry.job.waitUntilParked() }
    for entry in entries { save(entry) }
  }

  /// Stores every job now, whatever changed; for example when the app goes to the background.
  public func saveAll() {
    let entries = state.withLock(owner: self) { $0.entries }
    for entry in entries { save(entry) }
  }

  /// Cancels the job `id` and waits until its work stopped, as ``Job/cancel()`` does; the job stays
  /// in the manager, ``JobStatus/failed``.
  ///
  /// - Returns: Whether this call cancelled the job; `false` when there is no such job.
  @discardableResult
  nonisolated(nonsending) public func cancel(id: String) async -> Bool {
    guard let job = job(id: id) else { return false }
    return await job.cancel()
  }

  /// Cancels the job `id` as ``Job/cancelAndReport()`` does: waits until its work stopped and says
  /// whether the server cancelled its job too (for a server job).
  ///
  /// - Returns: What the cancel did; `nil` when there is no such job.
  nonisolated(nonsending) public func cancelAndReport(id: String) async -> JobCancelOutcome? {
    guard let job = job(id: id) else { return nil }
    return await job.cancelAndReport()
  }

  /// Asks the server once about each paused server job, without resuming its work, and records
  /// what it says: the status, new messages and progress, stored at once.
  ///
  /// Call it from a background refresh task, as the ArcGIS toolkit's `performStatusChecks()`:
  /// a job whose server job finished meanwhile is marked so (``ServerJobCheckpoint/lastState``),
  /// and its next ``Job/start()`` fetches only the result. The jobs are checked concurrently.
  /// Cancelling the calling task (a background task's deadline) cancels the requests in flight,
  /// and a job whose answer comes after the cancellation records nothing.
  ///
  /// A job is checked when its work is a ``ServerJobWork``, it is ``JobStatus/paused`` with its
  /// work not running (restored, parked at a pause point or waiting for its next poll), and its
  /// server job was submitted and has not finished. Running jobs poll for themselves.
  ///
  /// - Returns: One report per job checked, in the order of ``jobs``.
  nonisolated(nonsending) public func checkServerJobs() async -> [ServerJobCheck] {
    let entries = state.withLock(owner: self) { $0.entries }
    let checkable = entries.compactMap { entry in (entry.job as? any ServerStatusCheckable).map { (entry.id, $0) } }
    let results = await withTaskGroup(of: (String, Result<ServerJobStatus, any Error>?).self) { group in
      for (id, job) in checkable {
        group.addTask { (id, await job.checkServerStatus()) }
      }
      var results: [String: Result<ServerJobStatus, any Error>] = [:]
      for await (id, result) in group {
        if let result { results[id] = result }
      }
      return results
    }
    return entries.compactMap { entry in results[entry.id].map { ServerJobCheck(id: entry.id, result: $0) } }
  }

  /// Removes the job `id` from the manager and deletes its record; an unfinished job is cancelled
  /// first. Callers that remove the same job at once each return once its record is deleted; it
  /// is removed, and reported in ``events``, once.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/unknownJob`` when there is no such job, or the
  ///   store's error when the record cannot be deleted (the job is removed from the manager all the
  ///   same).
  nonisolated(nonsending) public func remove(id: String) async throws {
    guard let entry = entry(id: id) else {
      throw JobError(code: .unknownJob, message: "the manager holds no job \"\(id)\"")
    }
    if !entry.job.status.isFinished { await entry.job.cancel() }
    // Of callers that remove the job at once (each waited for its cancel), the one that takes it
    // out of the list lets go of it and reports it, once; each waits for its record's deletion.
    let removedHere = state.withLock(owner: self) { state -> Bool in
      guard let index = state.entries.firstIndex(where: { $0 === entry }) else { return false }
      state.entries.remove(at: index)
      state.idsBeingRemoved.insert(id)
      return true
    }
    // The id is free again once the record is deleted (or its deletion failed): a save of the job
    // in progress now would write over the record of a job added under it meanwhile.
    defer { if removedHere { state.withLock(owner: self) { _ = $0.idsBeingRemoved.remove(id) } } }
    if removedHere {
      release(entry)
      registrar.withMutation(of: self, keyPath: \.jobs) {}
      // Not before its addition: an add still saving the job reports the removal after it.
      let announced = entry.writer.withLock(owner: entry) { writer -> Bool in
        if !writer.announced { writer.removedBeforeAnnounced = true }
        return writer.announced
      }
      if announced { emit(.removed(id: id)) }
    }
    // The record goes through the job's writer, so a save in progress cannot bring it back; and
    // this call returns once the record is deleted, even when that save's writer deletes it.
    let failure: (any Error)? = await withUnsafeContinuation { continuation in
      let proceed = entry.writer.withLock(owner: entry) { writer -> Bool in
        writer.isRemoved = true
        writer.removalWaiters.append(continuation, id: nextUniqueID())
        return writer.writing.request()
      }
      if proceed { _ = runWrites(entry) }  // answers `continuation` once the record is deleted
    }
    ContinuationHandoff.awaited()
    if let failure { throw failure }
  }

  // MARK: - Events

  /// How many events ``events`` buffers for a consumer that falls behind: 1,000.
  public static var defaultEventBufferLimit: Int { 1_000 }

  /// The manager's events from now on: additions, removals, each job's changes and failed saves.
  ///
  /// The stream keeps the newest ``defaultEventBufferLimit`` events for a consumer that falls
  /// behind; use ``events(bufferingPolicy:)`` for another policy. It finishes when the manager is
  /// deallocated.
  public var events: AsyncStream<JobManagerEvent> {
    events(bufferingPolicy: .bufferingNewest(Self.defaultEventBufferLimit))
  }

  /// The manager's events, buffered as `bufferingPolicy` says.
  public func events(bufferingPolicy: AsyncStream<JobManagerEvent>.Continuation.BufferingPolicy) -> AsyncStream<JobManagerEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: JobManagerEvent.self, bufferingPolicy: bufferingPolicy)
    let id = nextUniqueID()
    state.withLock(owner: self) { $0.eventContinuations[id] = continuation }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      let removed = self.state.withLock(owner: self) { $0.eventContinuations.removeValue(forKey: id) }
      _ = consume removed
    }
    return stream
  }

  private func emit(_ event: JobManagerEvent) {
    let continuations = state.withLock(owner: self) { Array($0.eventContinuations.values) }
    for continuation in continuations { continuation.yield(event) }
  }

  // MARK: - Saving

  /// Starts watching a job: every change is saved, and its pause points wait for its checkpoints
  /// to be stored.
  private func adopt(_ entry: Entry) {
    let observerID = entry.job.addManagerObserver { [weak self] delivery in
      self?.handle(delivery, of: entry)
    }
    entry.writer.withLock(owner: entry) { $0.observerID = observerID }
    entry.job.requireDurability(true)
  }

  private func release(_ entry: Entry) {
    let observerID = entry.writer.withLock(owner: entry) { $0.observerID }
    entry.job.removeManagerObserver(observerID)
    entry.job.requireDurability(false)
    _ = entry.job.claimManagedID(nil)
  }

  private func handle(_ delivery: ManagedJobDelivery, of entry: Entry) {
    switch delivery {
    case .event(.snapshot):
      return
    case .event(let event):
      let (now, dropped) = entry.writer.withLock(owner: entry) { writer -> (Bool, JobEvent?) in
        guard !writer.announced else { return (true, nil) }
        return (false, writer.hold(event))
      }
      _ = consume dropped  // after the lock
      if now { emit(.job(id: entry.id, event)) }
      if case .status = event { save(entry) } else { scheduleSave(entry) }
    case .checkpointSaved, .end:
      save(entry)
    }
  }

  /// Saves the job after the save interval, unless a save is already scheduled.
  private func scheduleSave(_ entry: Entry) {
    let schedule = entry.writer.withLock(owner: entry) { writer -> Bool in
      guard !writer.isFlushScheduled, !writer.isRemoved else { return false }
      writer.isFlushScheduled = true
      return true
    }
    guard schedule else { return }
    let clock = self.clock
    let interval = saveInterval
    TaskLaunch.startDetached { [weak self] in
      try? await clock.sleep(for: interval)
      entry.writer.withLock(owner: entry) { $0.isFlushScheduled = false }
      self?.save(entry)
    }
  }

  /// Saves the job now, reporting a failure as an event.
  private func save(_ entry: Entry) {
    do {
      try write(entry)
    } catch {
      emit(.saveFailed(id: entry.id, error as? JobError ?? JobError(code: .storeFailed, message: "\(error)")))
    }
  }

  /// Writes the job's current form, or deletes its record once it is removed. One caller writes at
  /// a time per job; a caller that finds a write in progress asks the writer to write once more,
  /// so the last write always holds the newest state.
  private func write(_ entry: Entry) throws {
    guard entry.writer.withLock(owner: entry, { $0.writing.request() }) else { return }
    if let failure = runWrites(entry) { throw failure }
  }

  /// The writer's loop: writes (or deletes) until nobody asked for another write. Returns the
  /// error of the last pass that asked the store (none once the record was deleted); a deletion
  /// also answers the callers of `remove(id:)` waiting for it.
  private func runWrites(_ entry: Entry) -> (any Error)? {
    var failure: (any Error)?
    var reported: (any Error)?
    while true {
      let (removed, deletion) = entry.writer.withLock(owner: entry) { ($0.isRemoved, $0.deletion) }
      if let deletion {
        // Deleted once: a save scheduled before the removal (it reports nothing: it asked the store
        // nothing), or another remover, who is answered with the deletion's outcome.
        failure = deletion
      } else {
        do {
          if removed {
            try store.remove(id: entry.id)
          } else {
            let (data, generation) = entry.job.persistentForm(addedSequence: entry.sequence)
            defer { entry.job.markDurable(generation) }  // a failed save must not hold the work forever
            try store.save(try data.get(), id: entry.id)
          }
          failure = nil
        } catch {
          failure = error
        }
        reported = removed ? nil : failure  // a deletion's outcome is its removers'
      }
      let (again, removalWaiters) = entry.writer.withLock(owner: entry) { [failure] writer in
        if removed, writer.deletion == nil { writer.deletion = .some(failure) }
        // The waiters that came before `removed` was read are answered by this deletion; one
        // that came during it also asked for another pass, which answers it with the same outcome.
        let waiters = removed ? writer.removalWaiters.takeAll() : WaiterStore()
        return (writer.writing.endPass(), waiters)
      }
      for case let (_, waiter) in removalWaiters { waiter.handOff(.success(failure)) }
      if !again { break }
    }
    return reported
  }
}

extension JobManager: Observable {}
