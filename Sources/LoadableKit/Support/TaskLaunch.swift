/// Where LoadableKit starts its unstructured tasks (an attempt, a deferred cascade step).
///
/// Unstructured tasks do not inherit a task executor preference, so without this hook a test
/// that drives a scenario on its own executor would lose the attempts to the global pool. A test
/// binds ``executor`` around the scenario; task-locals *are* inherited by unstructured tasks, so
/// every task the library starts from inside the scenario runs on the test's executor too.
package enum TaskLaunch {
  @TaskLocal package static var executor: (any TaskExecutor)?

  /// Starts `operation` as an unstructured task, on the bound executor if there is one, at
  /// `priority` (`nil`: the caller's).
  @discardableResult
  static func start(
    priority: TaskPriority? = nil, _ operation: sending @escaping @isolated(any) () async -> Void
  ) -> Task<Void, Never> {
    // Task-locals are inherited, an attempt's context among them, but the new task is not part of
    // that attempt: `AttemptContext.current` holds only on the very task that runs the attempt, so
    // nothing needs unbinding here (it cost a task-local look-up a task).
    //
    // Without an executor the task is made without a preference: `Task(executorPreference: nil)`
    // still records one on the task, and the runtime then takes the task's status lock to look it
    // up at every enqueue, switch and run (some 1,300 instructions a task, issue 13).
    guard let executor else {
      return Task(priority: priority, operation: operation)
    }
    return Task(executorPreference: executor, priority: priority, operation: operation)
  }

  /// Starts `operation` as a detached task — it inherits no task-local state from whoever happened
  /// to cause it, such as a running attempt — on the bound executor if there is one.
  @discardableResult
  static func startDetached(
    priority: TaskPriority? = nil, _ operation: sending @escaping @isolated(any) () async -> Void
  ) -> Task<Void, Never> {
    guard let executor else { return Task.detached(priority: priority, operation: operation) }
    return Task.detached(executorPreference: executor, priority: priority) {
      await $executor.withValue(executor) { await operation() }
    }
  }
}
