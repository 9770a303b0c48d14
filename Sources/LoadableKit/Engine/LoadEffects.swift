/// The outcome of a request, decided under the lock.
enum LoadDecision {
  /// Answer now with this content (which may be `nil` for `load()` on a loadable without one).
  case content(LoadDelivery)
  /// Throw now.
  case failure(any Error)
  /// The waiter joined the running attempt, whose runner (once started) may need its priority
  /// raised to the caller's.
  case joined(AttemptRunner)
  /// A new attempt was created; the caller must start its task (``AsyncLoadable/launch(_:)``)
  /// after leaving the lock.
  case started(RunningAttempt)
  /// Nothing to do (a fire-and-forget request that found an attempt already running).
  case none
}

/// What an event that may end the running attempt decided: ``LoadStateMachine/cancel()``,
/// ``LoadStateMachine/removeInterest(from:)`` and an owner's ``LoadStateMachine/conclude(with:now:)``.
///
/// (An attempt's result, ``LoadStateMachine/finish(_:with:now:)``, returns its ``LoadEffects``
/// as they are, empty for a late result: on the path every load takes, taking the effects out
/// of this enum cost a copy of them — every reference in them retained and released, some 760
/// instructions a `map` node — which the compiler did not turn into a move.)
enum EndAction {
  /// Nothing to do: no attempt runs, the attempt is no longer the current one, or somebody else
  /// still wants it.
  case none
  /// The running attempt ended — cancelled, cancelled and undone, or concluded by its owner —
  /// and the effects say what follows (``AsyncLoadable/perform(_:)``).
  case ended(LoadEffects)
}

/// What a waiting caller leaving before its answer decided
/// (``LoadStateMachine/removeWaiter(_:)``). The caller resumes the waiter that left with
/// `CancellationError`, after carrying out the effects.
enum LeaveAction {
  /// The waiter is not there: it was answered already.
  case gone
  /// The waiter left; the attempt goes on for the others who want it.
  case left(LoadWaiter)
  /// The waiter left, the last that wanted an attempt a dependent started: the attempt is
  /// cancelled and the loadable put back as it was before it (SPEC §2).
  case leftLast(LoadWaiter, LoadEffects)
}

/// What to do after an attempt ended, was cancelled, or lost a waiter.
struct LoadEffects {
  var waiters = WaiterList()
  var result: Result<LoadDelivery, any Error> = .success(LoadDelivery(contentBox: nil, version: 0))
  var event: LoadStatusEvent?
  /// The task or driver of an attempt that was cancelled, to cancel after the lock is released.
  var cancel = AttemptRunner.none
  var changedContent = false
  /// The current attempt ended: a live view re-checks its sources.
  var endedAttempt = false
  /// `false` when it ended without its result being used (cancelled, or undone by a cascade):
  /// what it derived its content from does not count.
  var attemptCommitted = true
  /// What the state let go of: destroyed with the effects, after the lock is released, because
  /// a content's or an error's `deinit` is user code (and an ended attempt hands over its copies
  /// of both: ``LoadReleased/previous``).
  var released = LoadReleased()
  /// `false` when whoever carries the effects out already knows of the status change: a loader
  /// carrying out effects it decided for its key, whose state it read under its own lock
  /// (`ContentLoaderState.Effects.record(_:of:)`). Then ``AsyncLoadable/statusDidChange()`` is not
  /// called.
  var runsStatusHook = true
}

struct LoadReleased {
  var attempt: RunningAttempt?
  /// The ended attempt's context: it holds the loadable, so an attempt kept after it ended (a
  /// key's last shown attempt) must not keep it.
  var context: AttemptContext?
  /// A ``ContentBox``.
  var content: AnyContentBox?
  var error: (any Error)?
  /// What the ended attempt held of the loadable before it (``RunningAttempt/takePrevious()``).
  var previous: Previous = (nil, nil)

  typealias Previous = (content: AnyContentBox?, error: (any Error)?)

  /// Whether nothing is held (debug checks).
  var isEmpty: Bool {
    attempt == nil && context == nil && content == nil && error == nil && previous.content == nil
      && previous.error == nil
  }

  /// Takes what `attempt`, which ended or was superseded, held besides its waiters: its context
  /// and what the loadable looked like before it. Every end of an attempt calls it.
  mutating func takeHeld(by attempt: RunningAttempt) {
    context = attempt.context.take()
    previous = attempt.takePrevious()
  }
}

/// A status change to deliver to observers after the lock is released.
struct LoadStatusEvent {
  var status: LoadStatus
  var startDelivery: Bool
}
