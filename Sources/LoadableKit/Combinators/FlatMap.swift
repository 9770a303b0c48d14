import Synchronization

extension AsyncLoadable {
  /// A loadable whose content is that of the loadable `transform` makes from this one's content.
  ///
  /// Each attempt loads this loadable with the attempt's intent, calls `transform`, and loads the
  /// loadable it returns with the same intent — so a retry retries both, and a `cancelLoad()`
  /// cancels the inner attempt when nobody else wants it. If this loadable fails, `transform` is
  /// not called. When either content changes afterwards, the result is stale until it loads again.
  ///
  /// ```swift
  /// let table: AsyncLoadable<TableInfo> = layer.flatMap { info in FeatureTable(url: info.tableURL) }
  /// ```
  ///
  /// `transform` is synchronous and runs outside every lock, as a `map`'s: where this loadable's
  /// attempt ended, before that attempt's other callers are resumed, when it ended on a task the
  /// library started for it, at the priority the `flatMap`'s attempt runs at; otherwise on a task
  /// of its own. Keep it quick — make the loadable and let it do the work.
  @inlinable
  public func flatMap<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<T> {
    // Inlined into the caller, as `map` is: the source's content is unboxed there, in code
    // specialized for it, and the inner loadable's content box is the result's as it is.
    FlatMappedLoadable<Content, T, T>(source: self) { box in
      (try transform(ContentBox<Content>.unbox(box)), nil)
    }
  }

  /// Like ``flatMap(_:)``, but keeps this loadable's content next to the inner one's.
  ///
  /// ```swift
  /// let itemAndPortal: AsyncLoadable<(PortalItem, Portal)> = item.joined { Portal(url: $0.portalURL) }
  /// ```
  @inlinable
  public func joined<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<(Content, T)> {
    FlatMappedLoadable<Content, T, (Content, T)>(source: self, joins: true) { box in
      let content = ContentBox<Content>.unbox(box)
      return (try transform(content), { inner in ContentBox((content, ContentBox<T>.unbox(inner))) })
    }
  }
}

/// A `flatMap`'s (or `joined`'s) loadable.
///
/// Its step takes the source's ``ContentBox`` and returns the inner loadable and, for `joined`,
/// the function that makes the result's box from the inner content's (`nil`: the inner content's
/// box is the result's). Both are made where `flatMap` was called, specialized for its types: the
/// library's generic code looked up the metadata of three boxes and an optional at run time, an
/// attempt (a portal item of a map's graph).
@usableFromInline
final class FlatMappedLoadable<Source: Sendable, Inner: Sendable, Content: Sendable>: DerivedLoadable<Content>,
  @unchecked Sendable
{
  @usableFromInline
  typealias Step = @Sendable (AnyContentBox) throws -> (
    inner: AsyncLoadable<Inner>, finish: (@Sendable (AnyContentBox) -> AnyContentBox)?
  )
  /// Only `deinit` changes it (to hand it to ``DeferredRelease``), when nothing else can read it.
  @exclusivity(unchecked) private(set) var step: Step
  /// Made by `joined` rather than `flatMap` (for its name).
  let joins: Bool
  /// The attempt without a task that is running, with its priority and, once the transform ran,
  /// its second wait (see ``launchWithoutTask(_:probe:)``).
  private let running = Mutex<FlatMapAttempt?>(nil)

  @usableFromInline
  init(source: AsyncLoadable<Source>, joins: Bool = false, step: @escaping Step) {
    self.step = step
    self.joins = joins
    super.init(sources: [source])
  }

  deinit {
    // The step holds the caller's transform and what it captured: often the loadable it returns
    // (`layer.flatMap { _ in table }`), which may be the next link of a long chain. Handed to the
    // loop of the outermost deinit on this thread, as the sources are (DerivedLoadable's deinit),
    // and let go of here — a stored property is destroyed after that loop ran — so that a chain
    // of them is released one link after the other, not one inside the other.
    DeferredRelease.release(step)
    step = { _ in preconditionFailure("a released flatMap's step") }
  }

  // MARK: - An attempt without a task

  /// The attempt runs without a task of its own in the plain case a `map`'s does
  /// (`CombinedLoadable`): no declared dependency besides the source, no load options, the gate
  /// free — whoever started it, a caller or a dependent (a `zip` or a declared dependency waiting
  /// for a portal item). Its context waits for the source's attempt; the transform then runs
  /// where that attempt ended, when it ended on a task the library started for it (which binds
  /// nobody's task-locals) at this attempt's priority (the call that started it, raised by each
  /// caller who joined since: ``AttemptContext/demand``), as a `map`'s does; otherwise — content
  /// that somebody's call delivered (a writer's: SPEC §1), a source's task of another priority —
  /// on a task of its own, at that priority. It asks for the loadable it returned, which the
  /// context waits for next. Each wait is an edge of the wait-for graph while it lasts and asks
  /// with the attempt's intent; a cancel withdraws the wait in progress, or, between the two,
  /// keeps the second from beginning; a raised priority goes on to the loadable waited for, or to
  /// the next. A portal item of a map's graph paid a dependency group, two suspensions and its
  /// context bound as a task-local a load (#28).
  ///
  /// An attempt a caller started ran on a task until the transform could run where the source's
  /// attempt ended: begun inside the caller's call, a cancel from its source's observer ended it,
  /// and called the caller's completion handler, inside that call, against SPEC §1 (now held back
  /// for every loadable by `CompletionCall`), and its transform ran on a task of its own anyway.
  /// Without a task it saves that task (`item.flatMap { … }.load()`: ~56,100 → ~39,800
  /// instructions, #28).
  override func launchWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> Bool {
    guard let context = beginWithoutTask(attempt, probe: probe) else { return false }
    let stale = running.withLock(owner: self) { running in
      defer { running = FlatMapAttempt(attempt: ObjectIdentifier(attempt)) }
      return running
    }
    _ = consume stale  // none: every attempt takes its own when it ends
    @Sendable func drive() { self.drive(attempt, context: context, probe: probe) }
    if !Trampoline.runHere(drive) { Trampoline.later(drive) }
    return true
  }

  private func drive(_ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?) {
    _ = context.beginningDriver { context.beginSourceWait(on: sources[0], for: attempt, probe: probe) }
    // The context drives both waits: it is the driver even when the source answered at once,
    // since the wait for the inner loadable may be under way, or about to begin.
    let (cancel, escalate) = withState { $0.attach(.driver(context), to: attempt) }
    escalate.ifSome { context.escalate(to: $0) }
    if cancel { context.cancel() }
  }

  override func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?
  ) {
    // Which wait ended: the inner loadable's once the transform ran (its wait is handed on, a copy
    // released after the lock), else the source's.
    let id = ObjectIdentifier(attempt)
    let innerWait = running.withLock(owner: self) { running -> FlatMapInnerWait? in
      guard running?.attempt == id else { return nil }
      return running!.inner
    }
    goOn(attempt, context: context, probe: probe, with: outcome, innerWait: innerWait)
    // The copy of the inner wait is let go of as user code: `joined`'s function holds the source's
    // content, which may have changed since (its last reference), here where the inner loadable's
    // attempt ended, on its task.
    AttemptContext.releasingAsCallbacks(consume innerWait)
  }

  /// The rest of ``dependenciesDecided(_:attempt:context:probe:)``: the step runs here, on the
  /// trampoline, or on a task of its own (`innerWait`: the wait that ended, if it was the second).
  private func goOn(
    _ attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?, with outcome: DependencyGroup.Outcome,
    innerWait: FlatMapInnerWait?
  ) {
    @Sendable func advance() {
      self.advance(attempt, context: context, probe: probe, with: outcome, endingWait: innerWait)
    }
    if innerWait == nil, case .success = outcome {
      // The attempt's priority: the call that started it, raised by each caller who joined since
      // (a raise while it waited for its source went on to the source, and is kept here).
      let priority = context.demand
      if AttemptContext.isEndingOnAttemptTask && !context.isBeginningDriverHere
        && RawPriority(Task.currentPriority) == priority
      {
        // The source's attempt ended on a task the library started for it, which binds no
        // caller's or writer's task-locals (SPEC §1), and which runs at this attempt's priority:
        // the transform runs here, as a `map`'s does, and the loadable it returned is asked for
        // at that priority (a portal item of a map's graph paid a task for it, #28).
        if !Trampoline.runHere(advance) { Trampoline.later(advance) }
      } else {
        // Delivered inside somebody's call (a writer's, or the one that started the attempt), or
        // on a task of another priority (the source's attempt wanted more urgently by others): the
        // transform runs on a task of its own, at the attempt's priority, and asks for the inner
        // loadable at that priority, not the source's — and not at all for an attempt cancelled
        // meanwhile (its result would be dropped), as a `map`'s. A raise that comes before that
        // task ran its step raises it (``AttemptContext/goOn(onATaskAt:_:)``), as a `map`'s step's
        // (which runs at the current task's priority instead, if higher: not the inner load's).
        context.goOn(onATaskAt: priority) {
          guard self.withState({ $0.attempt === attempt }) else {
            return self.advance(attempt, context: context, probe: probe, with: .failure(CancellationError()), endingWait: nil)
          }
          advance()
        }
      }
    } else if context.isBeginningDriverHere {
      // Decided inside the call that started the attempt: it ends on a task, so that it does not
      // end inside that call, as a `map`'s does. (Decided on another thread while that call still
      // runs, it ends as it would a moment later: below.)
      AttemptContext.endOnATask(advance)
    } else {
      if !Trampoline.runHere(advance) { Trampoline.later(advance) }
    }
  }

  /// One of the two waits ended: the source's (the transform runs, and the wait for the loadable
  /// it returned begins), or that loadable's, `endingWait` (the attempt ends).
  private func advance(
    _ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?,
    with outcome: DependencyGroup.Outcome, endingWait: FlatMapInnerWait?
  ) {
    if let wait = endingWait {
      let result = outcome.flatMap { deliveries in
        Result { () throws -> AnyContentBox in
          guard let box = deliveries[0].contentBox else { throw LoadableError.noContent }
          recordDerivation(sources: [wait.sourceVersion], inner: (wait.inner, deliveries[0].version))
          return wait.finish.map { $0(box) } ?? box
        }
      }
      return end(attempt, context: context, probe: probe, with: result)
    }
    let next: FlatMapInnerWait
    switch outcome {
    case .failure(let error): return end(attempt, context: context, probe: probe, with: .failure(error))
    case .success(let deliveries):
      // Cancelled before its driver was attached (see `CombinedLoadable.complete`): no transform.
      guard context.isOwnersRunningAttempt else {
        return end(attempt, context: context, probe: probe, with: .failure(CancellationError()))
      }
      do {
        guard let box = deliveries[0].contentBox else { throw LoadableError.noContent }
        // The transform is user code, no part of the source's end that may run it here.
        let (inner, finish) = try AttemptContext.runningCallbacks { try step(box) }
        next = FlatMapInnerWait(sourceVersion: deliveries[0].version, inner: inner.asDependencyNode, finish: finish)
      } catch {
        return end(attempt, context: context, probe: probe, with: .failure(error))
      }
    }
    let id = ObjectIdentifier(attempt)
    // Nothing is replaced: the transform runs once an attempt. (Were it, the value replaced would
    // be released here, after the lock.)
    let replaced = running.withLock(owner: self) { running -> FlatMapInnerWait? in
      guard running?.attempt == id else { return nil }
      defer { running!.inner = next }
      return running!.inner
    }
    _ = consume replaced
    _ = context.beginSourceWait(on: next.inner, for: attempt, probe: probe, ofInnerLoadable: true)
  }

  private func end(
    _ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?,
    with result: Result<AnyContentBox, any Error>
  ) {
    // What the attempt kept (the inner loadable, `joined`'s function) is released after the lock,
    // as user code. (Not its last reference today — that is the copy `dependenciesDecided` took,
    // or the one a step queued on the trampoline or sent to a task captured — so no test tells
    // this release apart; but it is as much a part of the inner loadable's end.)
    let id = ObjectIdentifier(attempt)
    let kept = running.withLock(owner: self) { running in running?.attempt == id ? running.take() : nil }
    AttemptContext.releasingAsCallbacks(consume kept)
    context.hasEnded.store(true, ordering: .releasing)
    endAttempt(attempt, with: result, probe: probe)
  }

  override func performLoad() async throws -> Content {
    ContentBox<Content>.unbox(try await performLoadBoxed())
  }

  nonisolated(nonsending) override func performLoadBoxed() async throws -> AnyContentBox {
    let (values, versions) = try await loadSources()
    let (inner, finish) = try step(values[0])
    let (box, innerVersion) = try await loadInner(inner)
    recordDerivation(sources: versions, inner: (inner, innerVersion))
    return finish.map { $0(box) } ?? box
  }
}

/// A `flatMap`'s attempt without a task, while it runs: which attempt, and its second wait once
/// the transform ran. (Not nested in the generic class: a nested type's metadata would be looked
/// up at run time.)
struct FlatMapAttempt: Sendable {
  let attempt: ObjectIdentifier
  var inner: FlatMapInnerWait?
}

/// The second wait of a `flatMap`'s attempt without a task: the version of the source's content
/// the transform was given, the loadable it returned, and `joined`'s function that makes the
/// result's box.
struct FlatMapInnerWait: Sendable {
  let sourceVersion: UInt64
  let inner: any DependencyNode
  let finish: (@Sendable (AnyContentBox) -> AnyContentBox)?
}

extension FlatMappedLoadable: CombinatorNaming {
  var combinatorName: String { joins ? "joined" : "flatMap" }
  var namingSource: (any Loadable)? { sources[0] }
}
