// The one order of effects: the protocol of the hosts that carry effects out (EffectsHost), and
// the one function that does it, in order (carryOut(_:)).

/// An object whose state decides events under its lock and returns their effects as a value, to
/// be carried out after the lock in phases: an `AsyncLoadable` (its attempt machine), a `Job`
/// (its machine) and a `ContentLoader` (its state) are the three.
///
/// A host says how to carry out each phase of its own effects; ``carryOut(_:)`` alone fixes the
/// order of the phases (the ThreadSafety guide, "One order of effects"):
///
/// 1. ``cancelPhase(_:)``: cancel tasks and drivers (a cancel runs their cancellation handlers
///    here, user code among them, and may cascade to dependencies, on the trampoline);
/// 2. and 3. ``notifyPhase(_:)``: tell observers — Observation, status handlers and streams, claim
///    snapshots and events, a job's observers and instruments — then update live views;
/// 4. ``resumePhase(_:)``: resume waiters, then start what the event started;
/// 5. release what the state let go of: it goes with the effects value that ``carryOut(_:)``
///    consumed, after the phases, as user code (``AttemptContext/releasingAsCallbacks(_:on:)``).
///
/// Effects that hold another host's effects (a loader's hold its keys') carry out each phase of
/// those within the same phase of theirs, through the other host's phase methods.
protocol EffectsHost: AnyObject {
  associatedtype Effects
  /// Whether there is nothing to do at all: ``carryOut(_:)`` then returns at once.
  func isEmpty(_ effects: Effects) -> Bool
  /// 1. Cancel tasks and drivers.
  func cancelPhase(_ effects: Effects)
  /// 2. Tell observers; 3. then update live views.
  func notifyPhase(_ effects: Effects)
  /// 4. Resume waiters; then start what must start.
  func resumePhase(_ effects: Effects)
}

extension EffectsHost {
  /// Carries out `effects` in the one order. Observers, listeners and completion handlers are
  /// user code: they do not run as part of an attempt that happens to be on this task (a
  /// `cancelLoad()` from inside `performLoad()`), or their loads would count as that attempt's
  /// dependencies.
  @inline(__always)
  func carryOut(_ effects: consuming Effects) {
    guard !isEmpty(effects) else { return }
    // This thread's state, read once for the four blocks below (each read is a call).
    let thread = PerThread.current
    // A cancel runs cancellation handlers at once, `performLoad()`'s own among them: user code,
    // no part of an attempt's end either.
    AttemptContext.runningCallbacks(on: thread) { cancelPhase(effects) }
    AttemptContext.outside(on: thread) {
      // Observers are user code, no part of an attempt's end (`runningCallbacks`); the resume
      // phase goes on with a chain of attempts without a task where this one ended.
      AttemptContext.runningCallbacks(on: thread) { notifyPhase(effects) }
      resumePhase(effects)
    }
    // 5. What the state let go of is released with `effects`: user values, whose `deinit` is
    // user code too.
    AttemptContext.releasingAsCallbacks(consume effects, on: thread)
  }
}
