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
  let step: Step
  /// Made by `joined` rather than `flatMap` (for its name).
  let joins: Bool
  /// The second wait of the attempt without a task, while it lasts (see
  /// ``launchWithoutTask(_:probe:)``).
  private let innerWait = Mutex<FlatMapInnerWait?>(nil)

  @usableFromInline
  init(source: AsyncLoadable<Source>, joins: Bool = false, step: @escaping Step) {
    self.step = step
    self.joins = joins
    super.init(sources: [source])
  }

  // MARK: - An attempt without a task

  /// The attempt runs without a task of its own, as a `map`'s does (`CombinedLoadable`), in the
  /// same plain case (no declared dependency besides the source, no load options, the gate free):
  /// its context waits for the source's attempt, the transform runs when that ends, and the
  /// context then waits for the attempt of the loadable the transform returned. Each wait is an
  /// edge of the wait-for graph while it lasts and asks with the attempt's intent; a cancel
  /// withdraws the wait in progress, or — between the two — keeps the second from beginning; a
  /// raised priority goes to the loadable waited for. A portal item of a map's graph paid a task,
  /// a dependency group and two suspensions a load, only to wait (#28).
  override func launchWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> Bool {
    guard let context = beginWithoutTask(attempt, probe: probe) else { return false }
    @Sendable func drive() { self.drive(attempt, context: context, probe: probe) }
    if !Trampoline.runHere(drive) { Trampoline.later(drive) }
    return true
  }

  private func drive(_ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?) {
    _ = context.beginSourceWait(on: sources[0], for: attempt, probe: probe)
    context.driverBegun.store(true, ordering: .releasing)
    // The context drives both waits: it is the driver even when the source answered at once,
    // since the wait for the inner loadable may be under way, or about to begin.
    let (cancel, escalate) = withState { $0.attach(.driver(context), to: attempt) }
    escalate.ifSome { context.escalate(to: $0) }
    if cancel { context.cancel() }
  }

  override func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?
  ) {
    @Sendable func advance() { self.advance(attempt, context: context, probe: probe, with: outcome) }
    if context.driverBegun.load(ordering: .acquiring) {
      if !Trampoline.runHere(advance) { Trampoline.later(advance) }
    } else {
      // Decided inside the call that started the attempt (the source answered at once): the rest
      // runs on a task, as a `map`'s end does, so that the transform sees none of that caller's
      // task-locals (SPEC §1) and the attempt does not end inside that call.
      TaskLaunch.start { advance() }
    }
  }

  /// One of the two waits ended: the source's (the transform runs, and the wait for the loadable
  /// it returned begins), or that loadable's (the attempt ends).
  private func advance(
    _ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?,
    with outcome: DependencyGroup.Outcome
  ) {
    let id = ObjectIdentifier(attempt)
    if let wait = innerWait.withLock(owner: self, { $0?.attempt == id ? $0.take() : nil }) {
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
      do {
        guard let box = deliveries[0].contentBox else { throw LoadableError.noContent }
        let (inner, finish) = try step(box)
        next = FlatMapInnerWait(
          attempt: id, sourceVersion: deliveries[0].version, inner: inner.asDependencyNode, finish: finish)
      } catch {
        return end(attempt, context: context, probe: probe, with: .failure(error))
      }
    }
    let inner = next.inner
    // Nothing is replaced: the attempt's first wait found no second one stored.
    _ = innerWait.withLock(owner: self) { stored in
      defer { stored = next }
      return stored
    }
    _ = context.beginSourceWait(on: inner, for: attempt, probe: probe)
  }

  private func end(
    _ attempt: LoadStateMachine.Attempt, context: AttemptContext, probe: AttemptProbe?,
    with result: Result<AnyContentBox, any Error>
  ) {
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

/// What a `flatMap`'s attempt without a task keeps between its two waits: which attempt, the
/// version of the source's content the transform was given, the loadable it returned, and
/// `joined`'s function that makes the result's box. (Not nested in the generic class: a nested
/// type's metadata would be looked up at run time.)
struct FlatMapInnerWait: Sendable {
  let attempt: ObjectIdentifier
  let sourceVersion: UInt64
  let inner: any DependencyNode
  let finish: (@Sendable (AnyContentBox) -> AnyContentBox)?
}

extension FlatMappedLoadable: CombinatorNaming {
  var combinatorName: String { joins ? "joined" : "flatMap" }
  var namingSource: (any Loadable)? { sources[0] }
}
