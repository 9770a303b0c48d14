/// Where LoadableKit starts its unstructured tasks (an attempt, a deferred cascade step).
///
/// Unstructured tasks do not inherit a task executor preference, so without this hook a test
/// that drives a scenario on its own executor would lose the attempts to the global pool. A test
/// binds ``executor`` around the scenario; the library's tasks are detached (they inherit no
/// task-local values), but each is started on the executor bound where it was started, and binds
/// it again, so every task the library starts from inside the scenario runs on the test's
/// executor too.
package enum TaskLaunch {
  /// The executor bound around a scenario (`executor.withValue(_:operation:)`), read only once one
  /// was bound.
  package static let executor = GatedTaskLocal<any TaskExecutor>()

  /// Starts `operation` as a detached task, on the bound executor if there is one, at `priority`
  /// (``RawPriority/none``: the caller's, passed explicitly). A `RawPriority`, not a
  /// `TaskPriority?`: an optional of the Concurrency module's resilient type is tested and copied
  /// through its run-time value witnesses (~100 instructions a task).
  ///
  /// Detached: an attempt is shared, so the task that runs it inherits no task-local values from
  /// the caller, claim or dependent that happened to start it — a `withDependencies` override, a
  /// request's logger or credentials, a trace context (SPEC §1, §5). What a load needs is captured
  /// where the loadable is made; the library's own context (`AttemptContext`) is bound inside the
  /// attempt, and the bound executor is bound again in the new task.
  @discardableResult
  static func start<Success: Sendable>(
    priority: RawPriority = .none, _ operation: sending @escaping @isolated(any) () async -> Success
  ) -> Task<Success, Never> {
    // Without an executor the task is made without a preference: `Task(executorPreference: nil)`
    // still records one on the task, and the runtime then takes the task's status lock to look it
    // up at every enqueue, switch and run (some 1,300 instructions a task, issue 13).
    startDetached(priority: priority.isNone ? Task.currentPriority : TaskPriority(rawValue: priority.rawValue), operation)
  }

  /// Starts `operation` as a detached task — it inherits no task-local state from whoever happened
  /// to cause it, such as a running attempt — on the bound executor if there is one.
  ///
  /// Both functions are generic over the task's result, as `Task.detached` is: a closure written at
  /// the call is then made in the form `Task.detached` takes, where a `() async -> Void` needed a
  /// thunk and its context, one allocation a task. The bound executor's path, in a function of its
  /// own, keeps the usual path free of its closure (one more allocation a task, made even when no
  /// executor was bound). Together: an attempt's task costs ~1,100–1,500 instructions less (#28).
  @discardableResult
  static func startDetached<Success: Sendable>(
    priority: TaskPriority? = nil, _ operation: sending @escaping @isolated(any) () async -> Success
  ) -> Task<Success, Never> {
    guard let executor = executor.current else { return Task.detached(priority: priority, operation: operation) }
    return startDetached(on: executor, priority: priority, operation)
  }

  /// ``startDetached(priority:_:)`` on `executor`, bound again in the task.
  @inline(never)
  private static func startDetached<Success: Sendable>(
    on executor: any TaskExecutor, priority: TaskPriority?,
    _ operation: sending @escaping @isolated(any) () async -> Success
  ) -> Task<Success, Never> {
    Task.detached(executorPreference: executor, priority: priority) {
      await TaskLaunch.executor.withValue(executor) { await operation() }
    }
  }
}
