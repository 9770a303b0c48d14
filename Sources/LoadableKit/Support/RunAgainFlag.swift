/// One runner at a time, and the requests that come while it runs merged into one more pass: the
/// serial mechanism for work that reads the newest state each time it runs, instead of
/// delivering queued items (that is ``DeliveryQueue``). A `JobManager` job's writer (each pass
/// saves the job's current form) and a `PagedLoadable`'s page observers (each pass delivers the
/// newest snapshot) use it; nothing is queued per request, so nothing grows however often
/// requests come.
///
/// Held under its owner's lock. Whoever requests while nobody runs becomes the runner
/// (``request()`` returns `true`) and, after the lock, runs a pass, then asks ``endPass()`` under
/// the lock: `true` when a request came during the pass (the runner runs once more), `false` when
/// none did, which ends its role in the same step, so the next request finds it idle and its
/// caller runs.
struct RunAgainFlag: Sendable {
  /// A runner is at work.
  private(set) var isRunning = false
  /// A request came since the runner's pass began (or since ``beginPass()``).
  private var isRequested = false

  /// Asks for a pass. Returns `true` when the caller became the runner and must run after the
  /// lock; `false` when a runner is at work, which will run once more.
  mutating func request() -> Bool {
    if isRunning {
      isRequested = true
      return false
    }
    isRunning = true
    return true
  }

  /// For the runner, as a pass reads the state it works on: the requests so far are answered by
  /// this pass.
  mutating func beginPass() {
    isRequested = false
  }

  /// For the runner, after a pass: `true` when it must run once more (a request came during the
  /// pass); otherwise ends its role and returns `false`, in one step under the owner's lock.
  mutating func endPass() -> Bool {
    if isRequested {
      isRequested = false
      return true
    }
    isRunning = false
    return false
  }
}
