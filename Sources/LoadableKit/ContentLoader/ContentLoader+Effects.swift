// A loader as a host of effects (EffectsHost, Engine/EffectOrder.swift): the phases of what its
// state decided — its keys' effects and launches within them — and what they start: the tasks of
// keys' loads, the grace timers and the idle sweeper, and the delivery of the outbox.

extension ContentLoader {
  /// Carries out what the state asked for, after the lock, in the one order of effects
  /// (``EffectsHost/carryOut(_:)``, and the phases below); `effects.released` goes last, when
  /// `effects` dies.
  @usableFromInline
  func perform(_ effects: consuming State.Effects) {
    carryOut(consume effects)
  }
}

extension ContentLoader: EffectsHost {
  func isEmpty(_ effects: State.Effects) -> Bool {
    effects.storage == nil && effects.startSweeper == nil && !effects.drain
  }

  /// Cancels the tasks the state let go of, and the keys' attempts it cancelled.
  func cancelPhase(_ effects: State.Effects) {
    guard let lists = effects.storage else { return }
    for task in lists.cancelTasks { task.cancel() }
    // Each list is there only if something was recorded in it (see `Effects.Storage`).
    if let list = lists.entryEffects {
      forEachEntryEffects(list) { entry($0.pointee.entry).cancelPhase(of: effectsOf($0)) }
    }
  }

  /// Tells the keys' observers (and live views over the keys) of the changes the state made, and
  /// of the attempts it started for claims — before their tasks start, as for any loadable: a
  /// fast load cannot resume a caller that joined it before they were told — then delivers the
  /// claims' snapshots and the events queued in the outbox.
  func notifyPhase(_ effects: State.Effects) {
    if let lists = effects.storage {
      if let list = lists.entryEffects {
        forEachEntryEffects(list) { entry($0.pointee.entry).notifyPhase(of: effectsOf($0)) }
      }
      if let list = lists.launches {
        for index in list.indices {
          entry(list[index].entry).deliver(list[index].event, contentChanged: false, runsStatusHook: false)
        }
      }
    }
    if effects.drain { drain() }
  }

  /// Hands freed slots of the load limit on and resumes the keys' callers; then launches the
  /// attempts started for claims, changes the priorities of running ones, and starts the timers.
  func resumePhase(_ effects: State.Effects) {
    if let lists = effects.storage {
      for slot in lists.grantedSlots { slot.handOff() }
      if let list = lists.entryEffects {
        forEachEntryEffects(list) { entry($0.pointee.entry).resumePhase(of: effectsOf($0)) }
      }
      if let list = lists.launches {
        for index in list.indices {
          let launched = entry(list[index].entry)
          let attempt = list[index].attempt
          onTaskExecutor { launched.launch(attempt, priority: RawPriority(launchPriority(of: launched))) }
        }
      }
      if let reprioritized = lists.reprioritized {
        for (entry, priority, raised) in reprioritized { reprioritize(self.entry(entry), to: priority, raised: raised) }
      }
      if let startTimers = lists.startTimers {
        for (entry, id) in startTimers { launchGraceTimer(self.entry(entry), id: id) }
      }
    }
    if let deadline = effects.startSweeper { launchSweeper(firstDeadline: deadline) }
  }

  /// Calls `body` with each record of `list`, in place: an array's subscript copied each
  /// record's effects out (retaining and releasing the references they hold: ~420 instructions a
  /// record, three phases each, a key's end on the claiming thread).
  @inline(__always)
  private func forEachEntryEffects(_ list: [EntryEffects], _ body: (UnsafePointer<EntryEffects>) -> Void) {
    list.withUnsafeBufferPointer { records in
      guard let first = records.baseAddress else { return }
      for index in records.indices { body(first + index) }
    }
  }

  /// The effects of the record at `record`, where they are (see ``forEachEntryEffects(_:_:)``).
  @inline(__always)
  private func effectsOf(_ record: UnsafePointer<EntryEffects>) -> UnsafePointer<LoadStateMachine.Effects> {
    UnsafeRawPointer(record).advanced(by: MemoryLayout<EntryEffects>.offset(of: \EntryEffects.effects)!)
      .assumingMemoryBound(to: LoadStateMachine.Effects.self)
  }

  /// The key's loadable an effects record holds (``EntryEffects``), as what it is.
  @inline(__always)
  private func entry(_ object: AnyObject) -> KeyedLoadable {
    unsafeDowncast(object, to: KeyedLoadable.self)
  }
}

extension ContentLoader {
  /// The priority of the task of an attempt started for claims: its claims' priority, not the
  /// priority of whoever began the claim — a prefetch from the main thread loads at the prefetch
  /// priority, a visible row claimed from a background task at the visible one. A visible load
  /// begun from a task of a higher priority still (the main thread's) keeps that priority. Read
  /// under the loader's lock through ``SpecializedPaths/loadPriority``: the lock's closure, here,
  /// would look up the metadata of the loader's state at run time for every key launched.
  func launchPriority(of entry: KeyedLoadable) -> TaskPriority {
    let priority = keySource.specialized.loadPriority(self, entry)
    return priority == .visible ? max(Task.currentPriority, priority.taskPriority) : priority.taskPriority
  }

  /// Runs `body`, which starts tasks, so that they run on the loader's `taskExecutor`, if it has
  /// one — and so do the tasks they start in turn (the binding is a task-local, which tasks
  /// inherit).
  func onTaskExecutor<Result>(_ body: () -> Result) -> Result {
    guard let taskExecutor else { return body() }
    return TaskLaunch.executor.withValue(taskExecutor, operation: body)
  }

  /// Delivers queued notifications until the queue is empty. Only one caller delivers at a time
  /// (the one whose change found the queue idle), so every observer sees changes in order. Called
  /// in the notify phase, which ``EffectsHost/carryOut(_:)`` runs outside any attempt.
  private func drain() {
    while let batch = withState({ $0.outbox.takeBatch() }) {
      for delivery in batch {
        switch delivery {
        case .snapshot(.stream(let continuation), let snapshot, _):
          continuation.yield(snapshot)
        case .snapshot(.handler(let handler), let snapshot, let first):
          if first || handler.isActive.load(ordering: .acquiring) { handler.call(snapshot) }
        case .keyChanged(let entry):
          entry.tellObservers()
        case .finish(let continuation):
          continuation.finish()
        case .event(let continuation, let event):
          continuation.yield(event)
        case .finishEvents(let continuation):
          continuation.finish()
        }
      }
    }
  }

  func launchGraceTimer(_ entry: KeyedLoadable, id: UInt64) {
    let timeline = timeline
    let deadline = timeline.now() + gracePeriod
    let task = onTaskExecutor {
      TaskLaunch.startDetached(priority: Task.currentPriority) { [weak self, weak entry] in
        do { try await timeline.sleepUntil(deadline) } catch { return }
        guard let self, let entry else { return }
        let now = self.currentTime()
        self.perform(self.withState { $0.graceExpired(entry, id: id, now: now) })
      }
    }
    if withState({ $0.attachTimer(task, to: entry, id: id) }) { task.cancel() }
  }

  /// One task evicts entries by idle time: the idle list is ordered by the time each entry went
  /// idle, so it only ever needs to wake for the oldest one.
  func launchSweeper(firstDeadline: Duration) {
    let timeline = timeline
    let task = onTaskExecutor {
      TaskLaunch.startDetached { [weak self] in
        var deadline = firstDeadline
        while true {
          do { try await timeline.sleepUntil(deadline) } catch { return }
          guard let next = Self.sweep(self, now: timeline.now()) else { return }
          deadline = next
        }
      }
    }
    if withState({ $0.attachSweeper(task) }) { task.cancel() }
  }

  private static func sweep(_ loader: ContentLoader?, now: Duration) -> Duration? {
    guard let loader else { return nil }
    let swept = loader.withState { $0.sweep(now: now) }
    loader.perform(swept.1)
    return swept.next
  }
}
