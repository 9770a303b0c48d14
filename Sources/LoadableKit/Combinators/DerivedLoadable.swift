import Synchronization

/// A loadable whose content is derived from other loadables, its *sources*.
///
/// The sources are recorded as required dependencies, so every attempt loads them first, with the
/// attempt's intent, and a source's failure fails the derived loadable with the same error. The
/// derived loadable remembers the version of each source it derived from; when a source's content
/// changes afterwards, ``AsyncLoadable/needsSync`` becomes `true` (it is *stale*).
@usableFromInline
class DerivedLoadable<Content: Sendable>: AsyncLoadable<Content>, @unchecked Sendable {
  /// Only `deinit` changes it (to hand the sources to ``DeferredRelease``), when nothing else can
  /// read it: the reads, several a load, skip the dynamic exclusivity checks.
  @exclusivity(unchecked) private(set) var sources: [any DependencyNode]
  /// The version of each source the current content was derived from; the second part is the
  /// loadable a `flatMap` transform returned, with its version.
  /// (Most derived loadables have one source: its version is kept inline.)
  private let derivedFrom: Mutex<(sources: InlineFirstArray<UInt64>, inner: (node: any DependencyNode, version: UInt64)?)>

  init(sources: [any DependencyNode]) {
    self.sources = sources
    self.derivedFrom = Mutex((InlineFirstArray(repeating: 0, count: sources.count), nil))
    super.init()
    for source in sources { addDependency(node: source, kind: .required) }
  }

  deinit {
    // The sources and the inner loadable are the next links of the chain: released after this
    // deinit, by the loop the outermost one runs (AsyncLoadable's deinit drains it).
    let inner = derivedFrom.withLock(owner: self) { derivedFrom in
      defer { derivedFrom.inner = nil }
      return derivedFrom.inner?.node
    }
    // Sources are recorded as dependencies, so the state has extras and AsyncLoadable's deinit
    // drains the queue; a loadable without sources has nothing to queue.
    if !sources.isEmpty || inner != nil {
      DeferredRelease.release((sources, consume inner))
      sources = []
    }
  }

  /// Loads every source with the running attempt's intent and returns their contents in order.
  /// The declared-dependency step has already loaded them, so this reads the loaded values.
  nonisolated(nonsending) final func loadSources() async throws -> (values: [AnyContentBox], versions: [UInt64]) {
    let context = attemptContext(calledOn: self)
    var values: [AnyContentBox] = []
    var versions: [UInt64] = []
    values.reserveCapacity(sources.count)
    versions.reserveCapacity(sources.count)
    for source in sources {
      // A source that received the attempt's intent (as a declared dependency) is asked for a
      // plain load, which a loaded source answers at once with its content: read that directly.
      if let context, context.hasClaimed(source) {
        let state = source.erasedState
        if state.status == .loaded, let value = state.content {
          values.append(value)
          versions.append(state.version)
          continue
        }
      }
      let (value, version) = try await source.loadErased(context?.request(for: source) ?? .load, from: context)
      values.append(value)
      versions.append(version)
    }
    return (values, versions)
  }

  /// Loads the loadable a transform returned, with the attempt's intent; returns its content's
  /// box and version.
  nonisolated(nonsending) final func loadInner<T: Sendable>(_ inner: AsyncLoadable<T>) async throws -> (
    box: AnyContentBox, version: UInt64
  ) {
    let context = attemptContext(calledOn: self)
    let request = context?.request(for: inner) ?? .load
    let delivery = try await inner.request(request, from: context)
    guard let box = delivery.contentBox else { throw LoadableError.noContent }
    return (box, delivery.version)
  }

  final func recordDerivation(sources versions: [UInt64], inner: (node: any DependencyNode, version: UInt64)? = nil) {
    // The previous inner loadable is released after the lock, as user code: its deinit is (and
    // a `flatMap`'s attempt may end here inline, where its inner loadable's attempt ended).
    AttemptContext.releasingAsCallbacks(
      derivedFrom.withLock(owner: self) { derivedFrom in
        defer { derivedFrom = (InlineFirstArray(versions), inner) }
        return derivedFrom.inner?.node
      })
  }

  /// Records the versions of `deliveries` (one per source, in order) as the ones the content
  /// derives from, in the array already there (an attempt without a task ends here: no array
  /// made per load).
  final func recordDerivation(from deliveries: DependencyGroup.Deliveries) {
    _ = derivedFrom.withLock(owner: self) { derivedFrom -> (any DependencyNode)? in
      if derivedFrom.sources.count == deliveries.count {
        derivedFrom.sources.update { deliveries[$0].version }
      } else {
        derivedFrom.sources = InlineFirstArray(deliveries.lazy.map(\.version))
      }
      defer { derivedFrom.inner = nil }
      return derivedFrom.inner?.node
    }
  }

  /// Whether every source has content of the version the content was derived from: a source's
  /// change then has nothing to apply. Read without building arrays, as most changes that reach
  /// ``sourcesChanged()`` find (each node of a `map` chain that loads sees its source's).
  final var isDerivedFromCurrentSources: Bool {
    let versions = derivedFrom.withLock(owner: self) { $0.sources }
    guard versions.count == sources.count else { return false }
    for index in sources.indices where sources[index].versionOfContent != versions[index] {
      return false
    }
    return true
  }

  /// Records `versions` as the ones the content derives from, if they are all at least the
  /// recorded ones and one is newer; returns whether it did. A live update that lost a race with a
  /// newer one must not overwrite it.
  final func advanceDerivation(to versions: [UInt64]) -> Bool {
    derivedFrom.withLock(owner: self) { derivedFrom in
      guard !versions.elementsEqual(derivedFrom.sources),
        zip(versions, derivedFrom.sources).allSatisfy({ $0 >= $1 })
      else { return false }
      derivedFrom.sources = InlineFirstArray(versions)
      return true
    }
  }

  final var derivedVersions: [UInt64] { Array(derivedFrom.withLock(owner: self) { $0.sources }) }

  /// Starts `attempt` without a task (see `CombinedLoadable.launchWithoutTask(_:probe:)`, and a
  /// `flatMap`'s): its context, published as the running attempt's, or `nil` when it must run on a
  /// task — the sources are not its only declared dependencies, it has load options, or the gate
  /// is taken (an attempt's task is still running) — or it is no longer current.
  final func beginWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> AttemptContext? {
    let sourceCount = sources.count
    // The context is made only when the attempt goes without a task. (Made under the lock: its
    // initializer runs no user code.)
    return withState { state -> AttemptContext? in
      guard state.attempt === attempt, state.extras?.settings?.options == nil,
        (state.extras?.dependencies.count ?? 0) == sourceCount, state.tryEnterGate()
      else { return nil }
      // What the attempt's task would have run at: where it must go on on a task, it does so.
      let context = AttemptContext(
        owner: self, intent: attempt.intent, attemptID: attempt.id, probe: probe, onTask: false,
        demand: RawPriority(Task.currentPriority))
      attempt.context = context
      return context
    }
  }

  /// Forgets which source versions the content was derived from (none is newer than 0).
  final func forgetDerivation() {
    derivedFrom.withLock(owner: self) { derivedFrom in
      derivedFrom.sources.update { _ in 0 }
    }
  }

  /// The loadable the last `flatMap` transform returned, if any.
  final var innerSource: (any DependencyNode)? { derivedFrom.withLock(owner: self) { $0.inner?.node } }

  override var hasStaleSources: Bool {
    let (seen, inner) = derivedFrom.withLock(owner: self) { ($0.sources, $0.inner) }
    for (source, version) in zip(sources, seen) where source.erasedState.version != version {
      return true
    }
    if let inner, inner.node.erasedState.version != inner.version { return true }
    return false
  }
}

/// A loadable whose content is a pure function of its sources' contents: `map` and `zip`.
///
/// It is a *live view*: created over sources that are all loaded, it is loaded at once; and while
/// it is loaded, a change to a source's content recomputes it (or fails it, when the function
/// throws).
@usableFromInline
class CombinedLoadable<Content: Sendable>: DerivedLoadable<Content>, ContentListening, @unchecked Sendable {
  /// The identifiers of its listeners on the sources, in source order.
  private let listeners = Mutex(InlineFirstArray<UInt64>())
  /// A source's content changed while an attempt of this view ran: the attempt may have read the
  /// old content, so the change is applied once the attempt has ended. Set under the state lock.
  private let changedDuringAttempt = Atomic<Bool>(false)

  override init(sources: [any DependencyNode]) {
    super.init(sources: sources)
  }

  /// Subscribes to the sources, then derives the content at once when every source has content
  /// and is loaded or failed — the status mirrors the sources': loaded, or failed with the first
  /// failed source's error (a refresh that failed keeps its content, and so does the view). A
  /// source that is loading or not loaded leaves the view not loaded. Subclasses call it at the
  /// end of `init`.
  ///
  /// The view subscribes *before* it reads: a change that lands after the read is either heard by
  /// the listener or, if the listener found the view not yet loaded, caught by the check at the end.
  final func startLiveView() {
    var ids = InlineFirstArray<UInt64>()
    for source in sources {
      ids.append(source.addContentListener(self))
    }
    listeners.withLock(owner: self) { $0 = ids }
    let states = sources.map(\.erasedState)
    let settled = states.allSatisfy { $0.content != nil && ($0.status == .loaded || $0.status == .failed) }
    if settled {
      let result = Result { try combineBoxed(states.map { $0.content! }) }
      let sourceError = states.first { $0.status == .failed }?.error
      withState { state in
        switch result {
        case .success(let box): state.startLive(content: box, failure: sourceError)
        case .failure(let error): state.startLive(content: nil, failure: error)
        }
      }
      recordDerivation(sources: states.map(\.version))
      sourcesChanged()  // a change between the read and now
    } else if let failed = states.first(where: { $0.status == .failed }), let error = failed.error {
      withState { $0.startLive(content: nil, failure: error) }
    }
  }

  deinit {
    let ids = listeners.withLock(owner: self) { $0 }
    for (source, id) in zip(sources, ids) { source.removeContentListener(id) }
  }

  /// The function of the sources' contents, in source order, each in its ``ContentBox``.
  func combine(_ values: [AnyContentBox]) throws -> Content {
    preconditionFailure("CombinedLoadable subclasses override combine(_:)")
  }

  /// ``combine(_:)``, its result in its ``ContentBox``, as the state stores it. A subclass whose
  /// function was boxed where it was made (a `map`, in code specialized for its types) overrides
  /// it: the library's unspecialized code would look up `ContentBox<Content>`'s metadata at run
  /// time for each box it makes.
  func combineBoxed(_ values: [AnyContentBox]) throws -> AnyContentBox {
    ContentBox(try combine(values))
  }

  /// ``combineBoxed(_:)`` of the sources' deliveries (an attempt without a task).
  ///
  /// - Throws: ``LoadableError/noContent`` when a source delivered none, or the combination's
  ///   error.
  func combineBoxed(deliveries: DependencyGroup.Deliveries) throws -> AnyContentBox {
    var values: [AnyContentBox] = []
    values.reserveCapacity(deliveries.count)
    for delivery in deliveries {
      guard let value = delivery.contentBox else { throw LoadableError.noContent }
      values.append(value)
    }
    return try combineBoxed(values)
  }

  override func performLoad() async throws -> Content {
    let (values, versions) = try await loadSources()
    let content = try combine(values)
    recordDerivation(sources: versions)
    return content
  }

  // MARK: - An attempt without a task

  /// The attempt runs without a task of its own: the sources' attempts run on theirs, and the
  /// content is computed in a callback when the last one delivered. A chain of maps paid a task,
  /// a continuation and two handlers a node, only to wait (issue 13). Only the plain case takes
  /// this path: no declared dependency besides the sources, no load options, the gate free;
  /// otherwise the attempt runs on a task, as any attempt does, with ``performLoad()``.
  ///
  /// The rules are the task's: the sources load concurrently with the attempt's intent, and each
  /// wait is an edge of the wait-for graph while it lasts; the first failure fails the attempt and
  /// withdraws the other waits; cancelling the attempt withdraws them (its driver is a
  /// ``DependencyGroup``, or for one source the context, whose one waiter is the whole wait: see
  /// ``AttemptContext/beginSourceWait(on:for:probe:)``); a caller's raised priority goes on to the
  /// sources. A chain starts and ends one level inside the other at most 32 times
  /// (``Trampoline``), then from the bottom of the stack.
  override func launchWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> Bool {
    guard let context = beginWithoutTask(attempt, probe: probe) else { return false }
    @Sendable func drive() { self.drive(attempt, context: context, probe: probe) }
    if !Trampoline.runHere(drive) { Trampoline.later(drive) }
    return true
  }

  private func drive(_ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?) {
    // One source (a `map`'s) is one waiter on its attempt, kept by the context; several, a group.
    let driver = context.beginningDriver { () -> (any AttemptDriver)? in
      sources.count == 1
        ? context.beginSourceWait(on: sources[0], for: attempt, probe: probe)
        : DependencyGroup.begin(sources, in: context, for: attempt, probe: probe)
    }
    guard let driver else { return }  // decided at once
    let (cancel, escalate) = withState { $0.attach(.driver(driver), to: attempt) }
    escalate.ifSome { driver.escalate(to: $0) }
    if cancel { driver.cancel() }
  }

  override func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?
  ) {
    if context.isBeginningDriverHere {
      // Decided inside the call that started the attempt (every source answered at once): the
      // attempt ends on a task, so that a completion handler registered by that call runs after
      // it returned (SPEC §1), as it would after an attempt on a task. (Decided on another thread
      // while that call still runs — a writer's call answering the source it just joined — it is
      // decided as it would be a moment later: below, where the source's waiters after it find
      // it ended.)
      AttemptContext.endOnATask { self.complete(attempt, context: context, probe: probe, with: outcome) }
    } else if !outcome.isSuccess || AttemptContext.isEndingOnAttemptTask {
      // The transform runs where the sources' attempts ended when that is on an attempt's task,
      // which binds no caller's task-locals; a failure runs no transform.
      @Sendable func complete() { self.complete(attempt, context: context, probe: probe, with: outcome) }
      if !Trampoline.runHere(complete) { Trampoline.later(complete) }
    } else {
      // Delivered inside somebody's synchronous call (a writer's): the transform does not run
      // there, with its task-locals (SPEC §1), but on a task of its own — and not at all for an
      // attempt cancelled meanwhile (its result would be dropped; what it derived from must not
      // be recorded).
      AttemptContext.goOnOnATask(for: context) {
        let current = self.withState { $0.attempt === attempt }
        self.complete(attempt, context: context, probe: probe, with: current ? outcome : .failure(CancellationError()))
      }
    }
  }

  /// The sources delivered (or one failed, or the attempt was cancelled).
  private func complete(
    _ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?,
    with outcome: DependencyGroup.Outcome
  ) {
    let result = outcome.flatMap { deliveries in
      // An attempt cancelled before its driver was attached (the cancel found no driver to tell:
      // a source's observer cancelled it while the call that started it was still setting it up)
      // is over: its transform does not run, and it derived nothing.
      guard context.isOwnersRunningAttempt else { return Result<AnyContentBox, any Error>.failure(CancellationError()) }
      return Result { () throws -> AnyContentBox in
        // The transform is user code, no part of the source's end that runs it here (a write it
        // makes inside a task-local of its own must not let another transform run inline in it).
        let box = try AttemptContext.runningCallbacks { try combineBoxed(deliveries: deliveries) }
        recordDerivation(from: deliveries)
        return box
      }
    }
    LiveViewSeams.afterDerivationRecorded(self)
    context.hasEnded.store(true, ordering: .releasing)
    endAttempt(attempt, with: result, probe: probe)
  }

  override func attemptDidEnd(committed: Bool) {
    let changed = changedDuringAttempt.exchange(false, ordering: .acquiringAndReleasing)
    if !committed {
      // The attempt may have recorded versions it derived from, but its content was not kept:
      // forget them, so that the content is recomputed from the sources as they are now.
      forgetDerivation()
      sourcesChanged()
    } else if changed && !isDerivedFromCurrentSources {
      // Most changes heard during an attempt are the deliveries it derived from (each node of a
      // `map` chain hears its source's before its own attempt ends): checked first, without the
      // state's lock that `sourcesChanged()` takes before the same check.
      sourcesChanged()
    }
  }

  /// Whether a source change can be applied now: only while loaded and idle. While an attempt
  /// runs, the change is remembered and applied when it ends.
  private func canApplyChange(_ state: borrowing LoadStateMachine) -> Bool {
    if state.attempt != nil {
      changedDuringAttempt.store(true, ordering: .releasing)
      return false
    }
    return state.status == .loaded
  }

  /// A source's content changed (``ContentListening``): see ``sourcesChanged()``.
  final func sourceContentChanged() { sourcesChanged() }

  /// A source's content changed: recompute when loaded and idle (not loaded: `needsSync` already
  /// says so; loading: applied when the attempt ends).
  ///
  /// Most calls find nothing to apply (the view's own attempt is running, or it already derived
  /// from these versions): they return before ``apply(_:versions:)``, whose `Result<Content, …>`
  /// the unspecialized code would look up at run time.
  private func sourcesChanged() {
    guard withState({ canApplyChange($0) }), !isDerivedFromCurrentSources else { return }
    let states = sources.map(\.erasedState)
    guard states.allSatisfy({ $0.content != nil }) else { return }
    let versions = states.map(\.version)
    guard versions != derivedVersions else { return }
    apply(states.map { $0.content! }, versions: versions)
  }

  /// Recomputes the content from the sources' `values` and commits it, unless a newer change
  /// landed first.
  private func apply(_ values: [AnyContentBox], versions: [UInt64]) {
    let result = Result { try combineBoxed(values) }
    let effects = withState { state -> LoadStateMachine.Effects in
      // The version check and the commit happen under the one lock, so of two concurrent updates
      // the older cannot land last.
      guard canApplyChange(state), advanceDerivation(to: versions) else { return .init() }
      return state.update(result).effects
    }
    perform(consume effects)
  }
}
