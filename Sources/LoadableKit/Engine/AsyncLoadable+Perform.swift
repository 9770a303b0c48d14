import Observation
import Synchronization

// A loadable as a host of effects (EffectsHost, `EffectOrder.swift`): what its attempt machine's
// events return is carried out after the lock, in the one order of effects — cancel the attempt's
// task or driver; tell observers (Observation, status handlers and streams, then the subclass's
// status hook); notify live views (content listeners) and let a live view apply changes that
// arrived during the attempt; resume the waiters; release what the state let go of.
extension AsyncLoadable: EffectsHost {
  /// Runs `body` on the state under the lock, and publishes what lock-free readers check.
  ///
  /// Always inlined: called out of line, its result — of a generic type, in the library's
  /// unspecialized code — went through memory and the type's value witnesses on every event
  /// (a `map` node built, loaded and released: 22,179 instructions, 21,542 inlined).
  @usableFromInline @inline(__always)
  final func withState<R>(_ body: (inout LoadStateMachine) -> R) -> R {
    state.withLock(owner: self) { state in
      let result = body(&state)
      statusMirror.store(state.status.code, ordering: .releasing)
      if state.extras != nil && !hasExtras.load(ordering: .relaxed) { hasExtras.store(true, ordering: .releasing) }
      if state.registrarBox != nil && !hasRegistrar.load(ordering: .relaxed) {
        hasRegistrar.store(true, ordering: .releasing)
      }
      return result
    }
  }

  /// Carries out `effects` (``EffectsHost/carryOut(_:)``).
  final func perform(_ effects: consuming LoadStateMachine.Effects) {
    carryOut(consume effects)
  }

  /// Carries out what an event that can end the running attempt decided, if anything.
  final func perform(_ action: consuming EndAction) {
    if case .ended(let effects) = consume action { carryOut(consume effects) }
  }

  final func isEmpty(_ effects: LoadStateMachine.Effects) -> Bool {
    let isEmpty =
      effects.cancel.isNone && effects.event == nil && !effects.changedContent && !effects.endedAttempt
      && effects.waiters.isEmpty
    // What is let go of is not read: nothing is unless something else happens too (an attempt
    // ends, the content changes). Effects found empty are dropped at once, not as user code
    // (`carryOut`), which is right only because they hold no user value.
    assert(!isEmpty || effects.released.isEmpty, "effects that release a value without any change")
    return isEmpty
  }

  /// Cancelling runs the task's cancellation handlers (or the driver's cancel) here, which may
  /// cascade to dependencies, on the trampoline.
  final func cancelPhase(_ effects: LoadStateMachine.Effects) {
    effects.cancel.cancel()
  }

  final func notifyPhase(_ effects: LoadStateMachine.Effects) {
    let toListeners = effects.changedContent && effects.result.isSuccess
    notify(
      effects.event, contentChanged: effects.changedContent, runsStatusHook: effects.runsStatusHook,
      toListeners: toListeners, handed: toListeners ? effects.waiters.soleDependentWaiter : nil,
      endedAttempt: effects.endedAttempt, committed: effects.attemptCommitted)
  }

  final func resumePhase(_ effects: LoadStateMachine.Effects) {
    // An attempt that ends on its own task resumes its waiters as they come; elsewhere (a
    // writer's call, a cancel) they are resumed in an order that holds (`resumeInOrder`).
    let thread = PerThread.current
    if thread.pointee.attemptTaskDepth > 0 && thread.pointee.completionCalls.isEmpty {
      effects.waiters.forEachEntry { $0.resume(with: effects.result) }
    } else {
      effects.waiters.resumeInOrder(with: effects.result, on: thread)
    }
  }

  // The phases of effects read where they are kept: a loader carries out its keys' effects from
  // its own list, where a copy of each whole value (its waiters, result, runner and what it lets
  // go of) cost some 250 instructions a phase, three a key's claim or end. (A loadable's own
  // phases take the value: it is theirs, and read in place.)

  final func cancelPhase(of effects: UnsafePointer<LoadStateMachine.Effects>) {
    effects.pointee.cancel.cancel()
  }

  final func notifyPhase(of effects: UnsafePointer<LoadStateMachine.Effects>) {
    let changedContent = effects.pointee.changedContent
    let toListeners = changedContent && effects.pointee.result.isSuccess
    // The count is read in place; the list itself only when it holds one waiter (a key's claims
    // are no waiters): read through the pointer, it is copied for the call, each slot through
    // its type's value witnesses (~510 instructions a key's change).
    let handed = toListeners && effects.pointee.waiters.count == 1 ? effects.pointee.waiters.soleDependentWaiter : nil
    notify(
      effects.pointee.event, contentChanged: changedContent, runsStatusHook: effects.pointee.runsStatusHook,
      toListeners: toListeners, handed: handed,
      endedAttempt: effects.pointee.endedAttempt, committed: effects.pointee.attemptCommitted)
  }

  /// A key's effects seldom resume anyone (its claims are not waiters): only then is the waiter
  /// list read, through a copy.
  final func resumePhase(of effects: UnsafePointer<LoadStateMachine.Effects>) {
    if !effects.pointee.waiters.isEmpty { resumePhase(effects.pointee) }
  }

  /// Observers and live derived loadables hear of the change before the callers resume, so a
  /// caller that returns from `fetch()` finds `map` results and status handlers up to date
  /// (unless another thread is delivering this loadable's notifications at that moment).
  @inline(__always)
  private func notify(
    _ event: LoadStateMachine.StatusEvent?, contentChanged: Bool, runsStatusHook: Bool, toListeners: Bool,
    handed: AttemptContext?, endedAttempt: Bool, committed: Bool
  ) {
    deliver(event, contentChanged: contentChanged, runsStatusHook: runsStatusHook)
    if toListeners { notifyContentListeners(except: handed) }
    if endedAttempt { attemptDidEnd(committed: committed) }
  }

  /// Tells the derived loadables that listen that the content changed. Deep chains are notified
  /// through a trampoline so a long `map` chain cannot overflow the stack.
  ///
  /// One listener (a `map` over this loadable) is read from its weak reference under the lock and
  /// released after it, once told (the view may be freed then: its `deinit` runs outside the
  /// lock); several are copied out of the lock, weakly, each read when it is told.
  ///
  /// `handed`: the context of the attempt that is the ended attempt's one waiter, the attempt of a
  /// view waiting for this loadable as a source (the next node of a `map` chain, a `zip`). When
  /// that view is the one listener and the attempt is still its current one, it is not told: the
  /// resume phase hands the attempt this very content, which it derives from; and if the attempt
  /// ends without using it (undone meanwhile), the view re-reads its sources as it ends
  /// (``CombinedLoadable/attemptDidEnd(committed:)``), after this check, so after this content was
  /// committed. An attempt no longer current (undone before this check, its wait not yet
  /// withdrawn) is told as any. A later change is a change of its own, told as any. (A node of a
  /// loading chain paid a lock, a weak read, a call and, at its own end, a check of its sources
  /// for the news.)
  final func notifyContentListeners(except handed: AttemptContext? = nil) {
    var (one, several, handedIsTheOne) = state.withLock(owner: self) {
      state -> ((any ContentListening)?, [ContentListener], Bool) in
      state.extras?.contentListeners.targets(except: handed.map { ObjectIdentifier($0.owner) }) ?? (nil, [], false)
    }
    if handedIsTheOne, let handed {
      // Read in the view's lock, after this loadable's: never both at once.
      if handed.isOwnersRunningAttempt { return }
      one = handed.owner as? any ContentListening
    }
    if one != nil {
      // The view is held only for its call: the work takes it out of `one`, so that it is let go
      // of when the call returns, before the trampoline runs what was queued meanwhile (user code
      // that may drop the view, whose `deinit` must not wait for the queue). Queued past the depth
      // limit, the view is held weakly until its turn.
      if !Trampoline.runHere({
        let view = one.take()!
        view.sourceContentChanged()
      }) {
        Trampoline.later { [weak view = one] in view?.sourceContentChanged() }
        one = nil
      }
    } else if !several.isEmpty {
      Trampoline.run { [several] in
        for listener in several { listener.target?.sourceContentChanged() }
      }
    }
  }

  final func addContentListener(_ listener: any ContentListening) -> UInt64 {
    withState { state in
      let id = nextUniqueID()
      state.more.contentListeners.add(listener, id: id)
      return id
    }
  }

  final func removeContentListener(_ id: UInt64) {
    _ = state.withLock(owner: self) { $0.extras?.contentListeners.remove(id) }
  }

  /// Notifies observers of a status change, outside the lock; then ``statusDidChange()``, unless
  /// `runsStatusHook` is `false` (the caller already knows of the change: see
  /// ``LoadEffects/runsStatusHook``).
  final func deliver(_ event: LoadStateMachine.StatusEvent?, contentChanged: Bool, runsStatusHook: Bool = true) {
    guard event != nil || contentChanged else { return }
    // No registrar yet means nobody has read an observable property, so nobody tracks one. (The
    // flag is set under the lock that made the registrar, so a change made under the lock after
    // that finds it set.) Read in its box: an `ObservationRegistrar?` (a resilient type of
    // another module) is copied and destroyed through run-time value witnesses.
    if hasRegistrar.load(ordering: .acquiring), let box = state.withLock(owner: self, { $0.registrarBox }) {
      let registrar = box.registrar
      let subject = ObservedProperties.shared
      if event != nil { registrar.withMutation(of: subject, keyPath: ObservedProperties.loadStatus) {} }
      if contentChanged || event?.status == .loaded {
        registrar.withMutation(of: subject, keyPath: ObservedProperties.content) {}
      }
      if event != nil { registrar.withMutation(of: subject, keyPath: ObservedProperties.loadError) {} }
    }
    if event?.startDelivery == true { drainObservers() }
    if runsStatusHook && event != nil { statusDidChange() }
  }

  final func drainObservers() {
    while let batch = state.withLock(owner: self, { $0.extras?.observers.takeBatch() }) {
      for (id, handler, status) in batch where state.withLock(owner: self, { $0.extras?.observers.entries[id] != nil }) {
        handler(status)
      }
    }
  }
}
