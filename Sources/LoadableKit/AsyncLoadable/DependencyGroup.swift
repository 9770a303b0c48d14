import Synchronization

/// Several dependencies of one attempt, awaited together from the attempt's own task: one
/// continuation for the whole group, and one waiter on each dependency's attempt.
///
/// This is what ``AttemptContext/loadAll(_:)`` does for dependencies that are ``AsyncLoadable``s
/// (a `zip`'s inputs, a loadable's declared dependencies). A task group would start a child task
/// per dependency only to wait for an attempt that already runs on a task of its own (issue 13:
/// a `zip` paid two tasks per input).
///
/// It keeps the task group's rules:
/// - every dependency loads concurrently, with the attempt's intent, and each wait is an edge of
///   the wait-for graph while it lasts;
/// - the first failure fails the group at once, and the waits still pending are withdrawn, as a
///   cancelled child task's would be: an attempt that only this one wanted is cancelled and put
///   back as it was (SPEC §2);
/// - cancelling the attempt's task withdraws every pending wait and throws `CancellationError`;
/// - a raised priority is passed on to every dependency still awaited.
///
/// Every waiter is resumed exactly once, by the dependency (its attempt's end, or the withdrawal,
/// which resumes it with `CancellationError`); the group's continuation is resumed exactly once,
/// by whichever of success, the first failure and cancellation comes first.
final class DependencyGroup: Sendable {
  private struct Pending {
    let node: any DependencyNode
    let waiterID: UInt64
  }

  private struct State {
    var continuation: UnsafeContinuation<Void, any Error>?
    /// Set once the outcome is decided: later arrivals are ignored, later registrations withdrawn.
    var isDecided = false
    /// The waits registered and not yet answered, by index.
    var pending: [Int: Pending] = [:]
    var remaining: Int
  }

  private let state: Mutex<State>
  private let context: AttemptContext
  /// The dependencies waited for, by index.
  private let nodes: [any DependencyNode]

  private init(_ nodes: [any DependencyNode], context: AttemptContext) {
    self.state = Mutex(State(remaining: nodes.count))
    self.context = context
    self.nodes = nodes
  }

  /// Waits until every node delivered, or throws the first failure.
  ///
  /// A node that can answer at once (loaded; or loading, asked if needed, and not needing a
  /// sync) is not waited for, as ``AsyncLoadable/request(_:from:)`` would not wait: no edge, no
  /// waiter.
  ///
  /// - Throws: the first dependency's error, `CancellationError`, or
  ///   ``LoadableError/dependencyCycle`` (checked for every node waited for before any wait
  ///   begins).
  nonisolated(nonsending) static func loadAll(_ all: [any DependencyNode], in context: AttemptContext) async throws {
    var nodes: [any DependencyNode] = []
    var requests: [LoadRequest] = []
    nodes.reserveCapacity(all.count)
    requests.reserveCapacity(all.count)
    for node in all {
      let request = context.request(for: node)
      switch node.immediateAnswer(to: request) {
      case .success?: continue
      case .failure(let error)?: throw error  // nothing started yet: nothing to withdraw
      case nil:
        nodes.append(node)
        requests.append(request)
      }
    }
    guard !nodes.isEmpty else { return }
    // Every edge is recorded, and checked for a cycle, before the first wait begins.
    var begun = 0
    do {
      for node in nodes {
        try context.beginWait(on: node)
        begun += 1
      }
    } catch {
      for node in nodes[..<begun] { context.endWait(on: node) }
      throw error
    }
    let group = DependencyGroup(nodes, context: context)
    try await withTaskCancellationHandler {
      try await group.escalatingPriority {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
          group.start(requests: requests, continuation: continuation)
        }
      }
    } onCancel: {
      group.decide(.failure(CancellationError()))
    }
  }

  /// Registers a waiter on each node, stopping early once the outcome is decided.
  private func start(requests: [LoadRequest], continuation: UnsafeContinuation<Void, any Error>) {
    let alreadyDecided = state.withLock(owner: self) { state in
      if state.isDecided { return true }
      state.continuation = continuation
      return false
    }
    if alreadyDecided {
      // Cancelled before the first wait: nothing was registered.
      for node in nodes { context.endWait(on: node) }
      continuation.resume(throwing: CancellationError())
      return
    }
    for (index, node) in nodes.enumerated() {
      let waiterID = nextUniqueID()
      let registering = state.withLock(owner: self) { state -> Bool in
        guard !state.isDecided else { return false }
        state.pending[index] = Pending(node: node, waiterID: waiterID)
        return true
      }
      guard registering else {
        for node in nodes[index...] { context.endWait(on: node) }
        return
      }
      node.joinAsDependent(requests[index], from: context, waiterID: waiterID) { error in
        self.arrive(index, error: error)
      }
      // Decided while the waiter was being registered: the decision may have withdrawn the waits
      // before this one existed, so withdraw it again (a no-op once answered or withdrawn).
      if state.withLock(owner: self, { $0.isDecided && $0.pending[index] != nil }) {
        node.withdrawWaiter(waiterID)
      }
    }
  }

  /// A dependency delivered (or its wait was withdrawn, which arrives as `CancellationError`).
  ///
  /// Each registered waiter arrives exactly once, so its edge ends here first, before the outcome
  /// can be decided: once the caller resumes, no edge of an answered wait is left.
  private func arrive(_ index: Int, error: (any Error)?) {
    context.endWait(on: nodes[index])
    let decision = state.withLock(owner: self) { state -> Decision? in
      guard state.pending.removeValue(forKey: index) != nil else { return nil }
      state.remaining -= 1
      guard !state.isDecided, error != nil || state.remaining == 0 else { return nil }
      // The last success, or the first failure: decided under the lock, so that no success can
      // slip in between a failure and its decision.
      return takeDecision(&state)
    }
    if let decision { finish(decision, with: error.map { .failure($0) } ?? .success(())) }
  }

  /// Decides the outcome, if still open: resumes the caller and withdraws the pending waits.
  private func decide(_ outcome: Result<Void, any Error>) {
    guard let decision = state.withLock(owner: self, { state in state.isDecided ? nil : takeDecision(&state) }) else {
      return
    }
    finish(decision, with: outcome)
  }

  private struct Decision {
    let continuation: UnsafeContinuation<Void, any Error>?
    let withdrawn: [Pending]
  }

  private func takeDecision(_ state: inout State) -> Decision {
    state.isDecided = true
    defer { state.continuation = nil }
    return Decision(continuation: state.continuation, withdrawn: Array(state.pending.values))
  }

  /// Withdraws the waits still pending, then resumes the caller: as a task group cancels its
  /// children before it throws, the cascade to what only this attempt wanted is done when the
  /// attempt fails. Each withdrawn waiter is resumed with `CancellationError` by its node and
  /// arrives in ``arrive(_:error:)``, which ends its edge; the outcome is already decided. (A
  /// dependency whose attempt had already ended, and whose thread is still telling its observers,
  /// arrives a moment later: its edge belongs to an attempt that is over, which no cycle walk
  /// reaches any more.)
  private func finish(_ decision: Decision, with outcome: Result<Void, any Error>) {
    for wait in decision.withdrawn { wait.node.withdrawWaiter(wait.waiterID) }
    decision.continuation?.resume(with: outcome)
  }

  /// Passes a raised priority on to the dependencies still awaited (as each waiting child task
  /// of a task group would).
  nonisolated(nonsending) private func escalatingPriority(
    _ operation: nonisolated(nonsending) () async throws -> Void
  ) async throws {
    guard #available(macOS 26.0, iOS 26.0, watchOS 26.0, tvOS 26.0, visionOS 26.0, *) else {
      return try await operation()
    }
    try await withTaskPriorityEscalationHandler {
      try await operation()
    } onPriorityEscalated: { _, priority in
      let nodes = self.state.withLock(owner: self) { $0.pending.values.map(\.node) }
      Trampoline.run { for node in nodes { node.escalateRunningAttempt(to: priority) } }
    }
  }
}

extension AsyncLoadable {
  /// Joins or starts an attempt for a dependent's attempt, as ``request(_:from:)`` does, but
  /// waiting with `completion` instead of the calling task: called once, with `nil` or the error,
  /// after the lock is released. The wait does not make the attempt wanted (a cascading cancel
  /// still applies to it); ``withdrawWaiter(_:)`` withdraws it.
  func joinAsDependent(
    _ request: LoadRequest, from context: AttemptContext, waiterID: UInt64,
    completion: @escaping LoadCompletion
  ) {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    let (decision, event) = withState {
      $0.decide(
        request, needsSync: needsSync, waiter: (waiterID, .dependent(completion)), byDependent: true,
        callerCancelled: false)
    }
    AttemptContext.outside {
      deliver(event, contentChanged: false)
      switch decision {
      case .content: completion(nil)
      case .failure(let error): completion(error)
      case .joined(let task):
        let priority = Task.currentPriority
        (task ?? withState { $0.escalate(to: priority) })?.escalatePriority(to: priority)
      case .none: break
      case .started(let attempt): launch(attempt, parent: context)
      }
    }
  }
}
