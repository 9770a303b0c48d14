/// What the dependency machinery needs of an ``AsyncLoadable`` whose content type it cannot name.
protocol DependencyNode: Loadable {
  nonisolated(nonsending) func loadAsDependency(_ request: LoadRequest, from context: AttemptContext) async throws -> LoadDelivery
  func startAsIncidental(_ request: LoadRequest)
  /// Loads with `request` and returns the content, in its ``ContentBox``, with its version.
  nonisolated(nonsending) func loadErased(
    _ request: LoadRequest, from context: AttemptContext?
  ) async throws -> (content: AnyContentBox, version: UInt64)
  /// Status, content (in its ``ContentBox``) and version in one read.
  var erasedState: (status: LoadStatus, content: AnyContentBox?, error: (any Error)?, version: UInt64) { get }
  /// The version of the content, or `nil` without one: ``erasedState`` without copying (retaining)
  /// the content and the error.
  var versionOfContent: UInt64? { get }
  /// The context of the attempt running now, once it has started running.
  var runningAttemptContext: AttemptContext? { get }
  func joinAsDependent(_ request: LoadRequest, from context: AttemptContext, waiterID: UInt64, waiter: LoadWaiter)
  func withdrawWaiter(_ waiterID: UInt64)
  /// A dependent's attempt is about to wait for this node: whether the node wants to hear when
  /// the wait ends (``AsyncLoadable/callerWillWait(_:)``).
  func callerWillWait(_ context: AttemptContext?) -> Bool
  func callerStoppedWaiting(_ context: AttemptContext?)
  /// The answer to `request` when it needs no waiting (``LoadStateMachine/immediate(_:needsSync:)``),
  /// or `nil`.
  func immediateAnswer(to request: LoadRequest) -> Result<LoadDelivery, any Error>?
  func escalateRunningAttempt(to priority: TaskPriority)
  func addContentListener(_ listener: any ContentListening) -> UInt64
  func removeContentListener(_ id: UInt64)
  /// The dependencies of `attempt`, which runs without a task, were loaded, or one failed, or
  /// the attempt was cancelled (``DependencyGroup/begin(_:in:for:probe:)``).
  func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?)
}

extension AsyncLoadable: DependencyNode {
  nonisolated(nonsending) func loadAsDependency(_ request: LoadRequest, from context: AttemptContext) async throws -> LoadDelivery {
    try await self.request(request, from: context)
  }

  nonisolated(nonsending) func loadErased(
    _ request: LoadRequest, from context: AttemptContext?
  ) async throws -> (content: AnyContentBox, version: UInt64) {
    let delivery = try await self.request(request, from: context)
    guard let content = delivery.contentBox else { throw LoadableError.noContent }
    return (content, delivery.version)
  }

  var erasedState: (status: LoadStatus, content: AnyContentBox?, error: (any Error)?, version: UInt64) {
    state.withLock(owner: self) { ($0.status, $0.contentBox, $0.error, $0.contentVersion) }
  }

  var versionOfContent: UInt64? {
    state.withLock(owner: self) { $0.contentBox == nil ? nil : $0.contentVersion }
  }

  var runningAttemptContext: AttemptContext? {
    state.withLock(owner: self) { $0.attempt?.context }
  }

  /// This loadable as a node of the wait-for graph, made in its own class's code: made in a generic
  /// caller's, the existential looked up `AsyncLoadable<T>`'s metadata at run time (a `flatMap`'s
  /// inner loadable, an attempt).
  final var asDependencyNode: any DependencyNode { self }

  func immediateAnswer(to request: LoadRequest) -> Result<LoadDelivery, any Error>? {
    let needsSync = request.asksNeedsSync ? self.needsSync : false
    return withState { $0.immediate(request, needsSync: needsSync) }
  }

  func startAsIncidental(_ request: LoadRequest) {
    // A completion waiter marks the attempt as wanted, so a cascading cancel leaves it alone.
    submit(request, completion: { _ in })
  }
}
