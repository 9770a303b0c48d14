import Synchronization

/// Several dependencies of one attempt, awaited together: one waiter on each dependency's attempt,
/// and one outcome for the whole group.
///
/// Two ways to wait. ``loadAll(_:in:)`` awaits the group from the attempt's own task, with one
/// continuation: what ``AttemptContext/loadAll(_:)`` does for dependencies that are
/// ``AsyncLoadable``s (a loadable's declared dependencies). A task group would start a child task
/// per dependency only to wait for an attempt that already runs on a task of its own (issue 13: a
/// `zip` paid two tasks per input). ``begin(_:in:for:probe:)`` waits without any task: the group
/// is then the driver of an attempt that has none (a `zip`'s), and hands every dependency's
/// delivery to the attempt's owner; an attempt without a task that waits for one source (a
/// `map`'s) needs no group: its context keeps its one waiter (`AttemptContext+SourceWait.swift`).
///
/// It keeps the task group's rules:
/// - every dependency loads concurrently, with the attempt's intent, and each wait is an edge of
///   the wait-for graph while it lasts;
/// - the first failure fails the group at once, and the waits still pending are withdrawn, as a
///   cancelled child task's would be: an attempt that only this one wanted is cancelled and put
///   back as it was (SPEC §2);
/// - cancelling the attempt (its task, or the group as its driver) withdraws every pending wait
///   and ends the group with `CancellationError`;
/// - a raised priority is passed on to every dependency still awaited.
///
/// Every waiter is resumed exactly once, by the dependency (its attempt's end, or the withdrawal,
/// which resumes it with `CancellationError`); the group's outcome (its continuation, or
/// its owner) is handed on exactly once, by whichever of success, the first failure and
/// cancellation comes first.
final class DependencyGroup: AttemptDriver {
  /// Each dependency's delivery, in order, or the first failure.
  typealias Outcome = Result<Deliveries, any Error>
  /// The deliveries of a group, or the one of a `map`'s source wait: the first is stored inline.
  typealias Deliveries = InlineFirstArray<LoadDelivery>

  /// The wait on one node: its request until its waiter is registered, then the waiter's
  /// identifier until it is answered or withdrawn, and whether the node ranks its load by the
  /// demand of those who wait (``AsyncLoadable/callerWillWait(_:)``: it is then told when the wait
  /// ends).
  private enum Wait {
    case unregistered(LoadRequest)
    case pending(waiterID: UInt64, ranked: Bool)
    case answered

    var isPending: Bool {
      if case .pending = self { true } else { false }
    }
  }

  /// Who is handed the outcome, once: the continuation of ``loadAll(_:in:)``, or the attempt
  /// the group drives (its owner is the context's), without a closure to allocate for either.
  private enum Finish {
    /// Non-throwing, the outcome carried as a value (see ``LoadContinuation``): resumed by
    /// throwing, the error came out of the wait boxed once more for each level of a chain.
    case resume(UnsafeContinuation<Outcome, Never>)
    case attempt(RunningAttempt, probe: AttemptProbe?)
  }

  private struct State {
    /// Handed the outcome, once.
    var finish: Finish?
    /// Set once the outcome is decided: later arrivals are ignored, later registrations withdrawn.
    var isDecided = false
    /// Each node's wait, by index (one array for the requests and the waiters: each array is an
    /// allocation, and a group often waits for one node, the others having answered at once).
    var waits: InlineFirstArray<Wait>
    /// How many waits are not answered (a wait dropped before it was registered counts as
    /// answered): each is an edge of the wait-for graph. At 0 every node delivered, unless the
    /// outcome was decided first (only then are waits dropped), and the group leaves its attempt's
    /// context.
    var unanswered: Int
    /// The deliveries, by the index of the dependency in the group's caller's list (empty when
    /// they are not kept); each slot is filled by the time the group succeeds.
    var deliveries: Deliveries
    /// The highest priority passed on to the dependencies so far.
    var escalated = RawPriority.none
  }

  private let state: Mutex<State>
  /// The context of the attempt that waits.
  let context: AttemptContext
  /// The dependencies waited for, by index: the caller's list itself when every node is waited
  /// for (no copy), else the ones that are.
  private let nodes: [any DependencyNode]
  /// For each of them, its index in the caller's list (when the deliveries are kept); `nil` when
  /// the two are the same.
  private let positions: [Int]?

  private init(
    _ nodes: [any DependencyNode], waits: InlineFirstArray<Wait>, positions: [Int]?, deliveries: Deliveries,
    context: AttemptContext
  ) {
    self.state = Mutex(State(waits: waits, unanswered: nodes.count, deliveries: deliveries))
    self.context = context
    self.nodes = nodes
    self.positions = positions
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
    guard case .wait(let group) = try prepare(all, in: context) else { return }
    try await withTaskCancellationHandler {
      try await group.escalatingPriority {
        defer { ContinuationHandoff.awaited() }
        let outcome = await withUnsafeContinuation { (continuation: UnsafeContinuation<Outcome, Never>) in
          group.start(.resume(continuation))
        }
        if case .failure(let error) = outcome { throw error }
      }
    } onCancel: {
      group.decide(.failure(CancellationError()))
    }
  }

  /// Waits for every node without a task, for `attempt` of the context's owner: the owner's
  /// ``DependencyNode/dependenciesDecided(_:attempt:context:probe:)`` is called once, with every
  /// node's delivery in order or the first failure, after the locks are released (at once, on
  /// this thread, when no node needs waiting for). Returns the group, which the attempt stores as
  /// its driver (to cancel it, and to pass a raised priority on), or `nil` when it was decided at
  /// once.
  static func begin(
    _ all: [any DependencyNode], in context: AttemptContext, for attempt: RunningAttempt, probe: AttemptProbe?
  ) -> DependencyGroup? {
    switch Result(catching: { try prepare(all, in: context, keepingDeliveries: true) }) {
    case .failure(let error):
      context.owner.dependenciesDecided(.failure(error), attempt: attempt, context: context, probe: probe)
      return nil
    case .success(.answered(let deliveries)):
      context.owner.dependenciesDecided(.success(deliveries), attempt: attempt, context: context, probe: probe)
      return nil
    case .success(.wait(let group)):
      group.start(.attempt(attempt, probe: probe))
      return group
    }
  }

  private enum Preparation {
    /// Every node answered at once (their deliveries, when kept).
    case answered(Deliveries)
    /// The group of the nodes that must be waited for.
    case wait(DependencyGroup)
  }

  /// Asks every node for an immediate answer, and makes the group of those that have none.
  /// Every edge is recorded, and checked for a cycle, before the first wait begins.
  ///
  /// In the common case every node is waited for: the group then keeps `all` itself, and its
  /// positions are the indices; a copy of the waited ones is made at the first node that is not.
  private static func prepare(
    _ all: [any DependencyNode], in context: AttemptContext, keepingDeliveries: Bool = false
  ) throws -> Preparation {
    var waits = InlineFirstArray<Wait>()
    /// The nodes waited for and (when the deliveries are kept) their positions, once one node is
    /// not.
    var subset: (nodes: [any DependencyNode], positions: [Int])?
    var deliveries =
      keepingDeliveries ? Deliveries(repeating: LoadDelivery(contentBox: nil, version: 0), count: all.count) : Deliveries()
    func wait(_ position: Int, _ request: LoadRequest) {
      if waits.isEmpty { waits.reserveCapacity(all.count - position) }  // none if every node answers
      waits.append(.unregistered(request))
      if subset != nil {
        subset!.nodes.append(all[position])
        if keepingDeliveries { subset!.positions.append(position) }
      }
    }
    func skip(_ position: Int) {
      if subset == nil { subset = (Array(all[..<position]), keepingDeliveries ? Array(0..<position) : []) }
    }
    for (position, node) in all.enumerated() {
      let request = context.request(for: node)
      switch node.immediateAnswer(to: request) {
      case .success(let delivery)?:
        guard keepingDeliveries else {
          skip(position)
          continue
        }
        // The content of a loaded node is its answer. A node that answered at once while it
        // loads (asked if needed) is read as `performLoad()` reads it: waited for with a plain
        // load, which gives its new content (the attempt already gave it its intent).
        if node.erasedState.status == .loaded {
          deliveries[position] = delivery
          skip(position)
        } else {
          wait(position, .load)
        }
      case .failure(let error)?: throw error  // nothing started yet: nothing to withdraw
      case nil:
        wait(position, request)
      }
    }
    guard !waits.isEmpty else { return .answered(deliveries) }
    let nodes = subset?.nodes ?? all
    let group = DependencyGroup(
      nodes, waits: waits, positions: keepingDeliveries ? subset?.positions : nil, deliveries: deliveries,
      context: context)
    try context.beginWaits(of: group, on: nodes)
    return .wait(group)
  }

  /// The nodes whose waits are edges of the wait-for graph now (registered or about to be, and
  /// not answered): what a cycle walk through this group's attempt follows.
  var waitedNodes: [any DependencyNode] {
    state.withLock(owner: self) { state in
      state.waits.indices.compactMap { index -> (any DependencyNode)? in
        if case .answered = state.waits[index] { return nil }
        return nodes[index]
      }
    }
  }

  /// Drops the waits from `index` on that were never registered (the outcome was decided first):
  /// they end as edges.
  private func dropUnregistered(from index: Int) {
    let noEdgesLeft = state.withLock(owner: self) { state -> Bool in
      for later in index..<state.waits.count {
        if case .unregistered = state.waits[later] {
          state.waits[later] = .answered
          state.unanswered -= 1
        }
      }
      return state.unanswered == 0
    }
    if noEdgesLeft { context.endWaits(of: self) }
  }

  /// Registers a waiter on each node, stopping early once the outcome is decided.
  private func start(_ finish: Finish) {
    let alreadyDecided = state.withLock(owner: self) { state in
      if state.isDecided { return true }
      state.finish = finish
      return false
    }
    if alreadyDecided {
      // Cancelled before the first wait: nothing was registered.
      dropUnregistered(from: 0)
      hand(.failure(CancellationError()), to: finish)
      return
    }
    // Each node's answer is delivered outside any attempt (`joinAsDependent`): one block around
    // them all looks the task-local up once, not once a node.
    AttemptContext.outside { registerWaits() }
  }

  private func registerWaits() {
    for (index, node) in nodes.enumerated() {
      let waiterID = nextUniqueID()
      let request = state.withLock(owner: self) { state -> LoadRequest? in
        guard !state.isDecided, case .unregistered(let request) = state.waits[index] else { return nil }
        state.waits[index] = .pending(waiterID: waiterID, ranked: false)
        return request
      }
      guard let request else {
        dropUnregistered(from: index)
        return
      }
      // Nothing arrives before the waiter joins: the flag is set before anyone can read it.
      if node.callerWillWait(context) {
        state.withLock(owner: self) { $0.waits[index] = .pending(waiterID: waiterID, ranked: true) }
      }
      node.joinAsDependent(request, from: context, waiterID: waiterID, waiter: .dependent(self, index: index))
      // Decided while the waiter was being registered: the decision may have withdrawn the waits
      // before this one existed, so withdraw it again (a no-op once answered or withdrawn).
      if state.withLock(owner: self, { $0.isDecided && $0.waits[index].isPending }) {
        node.withdrawWaiter(waiterID)
      }
    }
  }

  /// A dependency delivered (or its wait was withdrawn, which arrives as `CancellationError`).
  ///
  /// Each registered waiter arrives exactly once, so its edge ends here, under the lock that
  /// decides the outcome: once the caller resumes, no edge of an answered wait is left. The group
  /// leaves its attempt's context with its last edge, and a node that ranks its load by its
  /// waiters' demand hears that this wait ended, both before the outcome is handed on: as a
  /// task's wait ends before the task goes on, no demand of a dependent that finished is left on
  /// its dependency.
  func arrive(_ index: Int, _ result: Result<LoadDelivery, any Error>) {
    var noEdgesLeft = false
    var ranked = false
    var decision = state.withLock(owner: self) { state -> Decision? in
      guard case .pending(_, let isRanked) = state.waits[index] else { return nil }
      ranked = isRanked
      state.waits[index] = .answered
      state.unanswered -= 1
      noEdgesLeft = state.unanswered == 0
      if case .success(let delivery) = result, !state.deliveries.isEmpty {
        state.deliveries[positions?[index] ?? index] = delivery
      }
      guard !state.isDecided else { return nil }
      switch result {
      case .failure(let error):
        // The first failure: decided under the lock, so that no success can slip in between a
        // failure and its decision.
        return takeDecision(&state, .failure(error))
      case .success:
        guard noEdgesLeft else { return nil }
        // Moved out: once decided, nothing reads them here any more.
        var deliveries = Deliveries()
        swap(&deliveries, &state.deliveries)
        return takeDecision(&state, .success(deliveries))
      }
    }
    if ranked { nodes[index].callerStoppedWaiting(context) }
    if noEdgesLeft { context.endWaits(of: self) }
    if let decision = decision.take() { finish(consume decision) }
  }

  /// Decides the outcome, if still open: resumes the caller and withdraws the pending waits.
  private func decide(_ outcome: Outcome) {
    guard let decision = state.withLock(owner: self, { state in state.isDecided ? nil : takeDecision(&state, outcome) }) else {
      return
    }
    finish(consume decision)
  }

  private struct Decision {
    let finish: Finish?
    let outcome: Outcome
    /// The waits still pending: each node's index and its waiter.
    let withdrawn: [(index: Int, waiterID: UInt64)]
  }

  private func takeDecision(_ state: inout State, _ outcome: Outcome) -> Decision {
    state.isDecided = true
    var withdrawn: [(index: Int, waiterID: UInt64)] = []
    if state.unanswered > 0 {
      for (index, wait) in state.waits.enumerated() {
        if case .pending(let waiterID, _) = wait { withdrawn.append((index, waiterID)) }
      }
    }
    // Moved out, not copied and then cleared (a retain and a release of the attempt and probe).
    return Decision(finish: state.finish.take(), outcome: outcome, withdrawn: withdrawn)
  }

  /// Withdraws the waits still pending, then hands the outcome on: as a task group cancels its
  /// children before it throws, the cascade to what only this attempt wanted is done when the
  /// attempt fails. Each withdrawn waiter is resumed with `CancellationError` by its node and
  /// arrives in ``arrive(_:_:)``, which ends its edge; the outcome is already decided. (A
  /// dependency whose attempt had already ended, and whose thread is still telling its observers,
  /// arrives a moment later: its edge belongs to an attempt that is over, which no cycle walk
  /// reaches any more.)
  ///
  /// The outcome is let go of as user code (``AttemptContext/releasingAsCallbacks(_:on:)``): the
  /// deliveries that arrived first may hold the last reference to a dependency's content that
  /// changed since (replaced as the attempt ended, which may be on the task of the last
  /// dependency's attempt).
  private func finish(_ decision: consuming Decision) {
    for wait in decision.withdrawn { nodes[wait.index].withdrawWaiter(wait.waiterID) }
    if let finish = decision.finish { hand(decision.outcome, to: finish) }
    AttemptContext.releasingAsCallbacks(decision)
  }

  private func hand(_ outcome: Outcome, to finish: Finish) {
    switch finish {
    case .resume(let continuation): continuation.handOff(.success(outcome))
    case .attempt(let attempt, let probe):
      context.owner.dependenciesDecided(outcome, attempt: attempt, context: context, probe: probe)
    }
  }

  // MARK: - Driving an attempt without a task

  /// The attempt was cancelled: the waits are withdrawn and the outcome is `CancellationError`.
  func cancel() {
    decide(.failure(CancellationError()))
  }

  /// Passes a raised priority on to the dependencies still awaited, once per higher priority: the
  /// driver's escalation, and the awaiting task's (``escalatingPriority(_:)``).
  func escalate(to priority: TaskPriority) {
    // The attempt's demand, at which it goes on on a task of its own when it must (a `zip` whose
    // last input a writer's call delivered: `CombinedLoadable.dependenciesDecided`).
    context.raiseDemand(to: RawPriority(priority))
    let nodes = state.withLock(owner: self) { state -> [any DependencyNode] in
      if state.isDecided { return [] }
      if RawPriority(priority) <= state.escalated { return [] }
      state.escalated = RawPriority(priority)
      return state.waits.indices.filter { state.waits[$0].isPending }.map { self.nodes[$0] }
    }
    guard !nodes.isEmpty else { return }
    Trampoline.run { for node in nodes { node.escalateRunningAttempt(to: priority) } }
  }

  /// Passes the awaiting task's raised priority on to the dependencies still awaited (as each
  /// waiting child task of a task group would), through ``escalate(to:)``.
  nonisolated(nonsending) private func escalatingPriority(
    _ operation: nonisolated(nonsending) () async throws -> Void
  ) async throws {
    guard #available(macOS 26.0, iOS 26.0, watchOS 26.0, tvOS 26.0, visionOS 26.0, *) else {
      return try await operation()
    }
    try await withTaskPriorityEscalationHandler {
      try await operation()
    } onPriorityEscalated: { _, priority in
      self.escalate(to: priority)
    }
  }
}

extension AsyncLoadable {
  /// Joins or starts an attempt for a dependent's attempt, as ``request(_:from:)`` does, but
  /// waiting with `waiter` — a wait of a ``DependencyGroup``, or an attempt's one wait for its
  /// source (``AttemptContext/beginSourceWait(on:for:probe:)``) — instead of with the calling
  /// task: the waiter hears of it once, with the delivery or the error, after the lock is
  /// released. The wait does not make the attempt wanted (a cascading cancel still applies to
  /// it); ``withdrawWaiter(_:)`` withdraws it.
  func joinAsDependent(_ request: LoadRequest, from context: AttemptContext, waiterID: UInt64, waiter: LoadWaiter) {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    let (decision, event) = withState {
      $0.decide(request, needsSync: needsSync, waiter: (waiterID, waiter), byDependent: true, callerCancelled: false)
    }
    AttemptContext.outside {
      deliver(event, contentChanged: false)
      switch decision {
      case .content(let delivery): waiter.resume(with: .success(delivery))
      case .failure(let error): waiter.resume(with: .failure(error))
      case .joined(let runner): escalateJoined(runner)
      case .none: break
      case .started(let attempt): launch(attempt, parent: context)
      }
    }
  }
}
