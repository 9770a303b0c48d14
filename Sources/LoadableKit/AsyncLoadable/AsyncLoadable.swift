import Observation
import Synchronization

/// A resource that loads asynchronously, once, for every caller that shares it.
///
/// An `AsyncLoadable` owns at most one *attempt* at a time. Every caller that asks while an
/// attempt runs joins it; a failure is remembered until a caller explicitly retries; the status is
/// observable. It speaks two dialects:
///
/// - ArcGIS Runtime's ``load()``, ``retryLoad()`` and ``cancelLoad()``;
/// - MMMLoadable's ``sync()``, ``syncIfNeeded()``, ``fetch()`` and ``fetchIfNeeded()``, which also
///   *refresh* a loaded resource while keeping its old ``content`` readable.
///
/// Make one from a closure, or subclass and override ``performLoad()``:
///
/// ```swift
/// let portal = AsyncLoadable { try await service.portalInfo() }
/// try await portal.load()                 // runs the closure once
/// async let a = portal.fetchIfNeeded()    // both share the answer; no second request
/// async let b = portal.fetchIfNeeded()
///
/// final class FeatureTable: AsyncLoadable<TableInfo>, @unchecked Sendable {
///   let url: URL
///   init(url: URL) { self.url = url; super.init() }
///   override func performLoad() async throws -> TableInfo { try await fetchInfo(url) }
/// }
/// ```
///
/// ## Behaviour
///
/// | call | notLoaded | loading | loaded | failed |
/// |---|---|---|---|---|
/// | ``load()`` | start, wait | join, wait | return at once | throw the stored error |
/// | ``retryLoad()`` | start, wait | join, wait | return at once | start, wait |
/// | ``cancelLoad()`` | — | fail the attempt and every waiter with `CancellationError` | — | — |
/// | ``sync()`` | start | — | refresh | start |
/// | ``syncIfNeeded()`` | start | — | refresh if ``needsSync`` | start |
/// | ``fetch()`` | start, wait | join, wait | refresh, wait | start, wait |
/// | ``fetchIfNeeded()`` | start, wait | join, or the content at once if `!needsSync` | the content at once if `!needsSync`, else refresh | start, wait |
///
/// The class is thread-safe without actor isolation: its state is a value held in a `Mutex`, and
/// every side effect (resuming callers, calling handlers, starting and cancelling tasks) happens
/// after the lock is released. No user code — ``performLoad()``, ``needsSync``, handlers — ever
/// runs under the lock.
///
/// The async methods are `nonisolated(nonsending)`: they run on the caller's executor. On a loaded
/// resource ``load()`` and ``fetchIfNeeded()`` answer without a suspension or an executor hop.
open class AsyncLoadable<Content: Sendable>: Loadable, Observable, @unchecked Sendable {
  @usableFromInline let state: Mutex<LoadStateMachine>
  /// Only `deinit` changes it (to hand a closure, and the loadables it captured, to
  /// ``DeferredRelease``), when nothing else can read it.
  @exclusivity(unchecked) @usableFromInline private(set) var operation: Operation
  // The flags after `operation`, in the bytes its enum tag leaves before the next 8-byte field
  // (before `state`, they took 8 bytes of their own: every loadable is 8 bytes smaller).
  /// A copy of the status for the lock-free fast path of ``load()``; written under the lock.
  @usableFromInline let statusMirror = Atomic<UInt8>(0)
  /// Set once the state has its out-of-line part (observers, dependencies, listeners, settings):
  /// only then has `deinit` anything to tear down, and only then does it take the lock. Written
  /// by ``withState(_:)``, through which every path that creates that part goes.
  let hasExtras = Atomic<Bool>(false)
  /// Set once an observable property was read, which makes the registrar: until then a change
  /// has nobody to notify, and ``deliver(_:contentChanged:runsStatusHook:)`` takes no lock to
  /// find that out. Written by ``withState(_:)``, through which the observable properties read.
  let hasRegistrar = Atomic<Bool>(false)

  /// What the default ``performLoad()`` runs. An enum rather than one async closure, so that a
  /// synchronous closure, a constant and an error are stored without a conversion thunk.
  ///
  /// No payload is of type `Content` (a constant's is its box), so the enum's layout is the same
  /// whatever `Content` is: the library's unspecialized `deinit` destroys it without looking up its
  /// metadata at run time.
  @usableFromInline enum Operation: Sendable {
    /// None: a subclass overrides ``performLoad()``.
    case overridden
    case async(@Sendable () async throws -> Content)
    case sync(@Sendable () throws -> Content)
    /// The content the loadable was made with, in the box its state holds too (some 330
    /// instructions a loadable's `deinit` spent looking up the enum's metadata, when this was the
    /// content itself).
    case constant(AnyContentBox)
    case failure(any Error)
  }

  /// What an attempt runs instead of ``performLoad()``, with the content in its ``ContentBox``:
  /// `operation`, in code made where the loadable was created (the initializers are inlinable),
  /// so specialized for the caller's `Content`. Called out of the library's unspecialized code,
  /// `performLoad()` looked up the metadata of `Operation` twice (to take its payload, and to
  /// destroy the copy) and the attempt that of `ContentBox<Content>` to box the result: some 330
  /// instructions each, an attempt (issue 28). A closure that captures nothing: no allocation.
  ///
  /// It is given the loadable and the identifier of the attempt it runs for: a `ContentLoader`
  /// key's load needs the attempt (its version rule and interim values are the attempt's), also
  /// where it runs in a child task (under a timeout), where no attempt is the current task's.
  ///
  /// `nil` for a subclass, which may override `performLoad()`, and for a loadable without an
  /// operation. Set in the initializer, never after: a `let`, read without the dynamic
  /// exclusivity check a class's `var` costs (~76 instructions an attempt).
  @usableFromInline let directLoad: (@Sendable (AnyObject, UInt64) async throws -> AnyContentBox)?

  // MARK: - Creating loadables

  /// Creates a loadable whose content comes from ``performLoad()``, which a subclass overrides.
  ///
  /// - Precondition: the subclass overrides ``performLoad()``. Loading an `AsyncLoadable` made with
  ///   this initializer and no override is a programming error and traps.
  @inlinable
  public init() {
    state = Mutex(LoadStateMachine(.notLoaded))
    operation = .overridden
    directLoad = nil
  }

  /// For a subclass whose attempts run `directLoad` (see ``directLoad``), given the attempt they
  /// run for, instead of `performLoad()`.
  @inlinable
  init(directLoad: @escaping @Sendable (AnyObject, UInt64) async throws -> AnyContentBox) {
    state = Mutex(LoadStateMachine(.notLoaded))
    operation = .overridden
    self.directLoad = directLoad
  }

  /// Inlinable, like the public initializers, so that creating a loadable is specialized for the
  /// caller's `Content` instead of looking up the generic metadata of its state at run time.
  @inlinable
  init(_ outcome: LoadStateMachine.Outcome, content: Content?, operation: Operation?) {
    var machine = LoadStateMachine(outcome, content: content)
    if case .constant(let box)? = operation { machine.contentBox = box }
    let status = machine.status
    state = Mutex(machine)
    statusMirror.store(status.code, ordering: .relaxed)
    self.operation = operation ?? .overridden
    if operation != nil, ObjectIdentifier(type(of: self)) == ObjectIdentifier(AsyncLoadable<Content>.self) {
      directLoad = { loadable, _ in
        switch unsafeDowncast(loadable, to: AsyncLoadable<Content>.self).operation {
        case .overridden: preconditionFailure("a loadable made with an operation has one")
        case .async(let operation): return ContentBox(try await operation())
        case .sync(let operation): return ContentBox(try operation())
        case .constant(let box): return box
        case .failure(let error): throw error
        }
      }
    } else {
      directLoad = nil
    }
  }

  /// Creates a loadable whose attempts run `operation`.
  ///
  /// Nothing runs until somebody loads it. Each attempt calls `operation` once.
  @inlinable
  public convenience init(_ operation: @escaping @Sendable () async throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .async(operation))
  }

  /// Creates a loadable whose attempts run the synchronous `operation`.
  ///
  /// This overload exists so that a closure that does not `await`, such as
  /// `AsyncLoadable { "value" }`, makes a loadable of `String` rather than a loadable *of the
  /// closure*.
  @inlinable @_disfavoredOverload
  public convenience init(_ operation: @escaping @Sendable () throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .sync(operation))
  }

  /// Creates a loadable that is already ``LoadStatus/loaded`` with `content`.
  ///
  /// It is a constant: a refresh succeeds with the same content.
  @inlinable @_disfavoredOverload
  public convenience init(content: Content) {
    self.init(.loaded, content: nil, operation: .constant(ContentBox(content)))
  }

  /// Creates a loadable that has already ``LoadStatus/failed`` with `error`.
  ///
  /// It is a constant: ``retryLoad()`` runs an attempt that fails with the same error.
  @inlinable
  public convenience init(error: any Error) {
    self.init(.failed(error), content: nil, operation: .failure(error))
  }

  deinit {
    // The operation's closure may hold the next link of a chain (`AsyncLoadable { try await
    // previous.load() ... }`): released by the loop of the outermost deinit on this thread, not
    // with the stored properties, one inside the other.
    if directLoad != nil {
      DeferredRelease.releaseOutermost(
        { operation = .overridden },
        queued: {
          defer { operation = .overridden }
          return operation
        })
    }
    // An idle loadable has nothing to tear down: no lock, and no generic metadata to look up.
    guard hasExtras.load(ordering: .acquiring) else {
      assert(state.withLock(owner: self) { $0.extras == nil }, "extras created outside withState(_:)")
      return
    }
    guard
      let extras = state.withLock(owner: self, { state in
        defer { state.extras = nil }
        return state.extras
      })
    else { return }
    for entry in extras.observers.entries.values { entry.onEnd?() }
    // The dependencies may be the next link of a long chain: the outermost deinit on this thread
    // releases them, and a deinit inside it queues them for that one's loop.
    DeferredRelease.releaseAndDrain(consume extras)
  }

  // MARK: - The subclass hook

  /// Loads the content. Called once per attempt, never concurrently for one instance.
  ///
  /// Override it in a subclass; the default runs the closure given to `init(_:)`. Inside it,
  /// call ``loadDependency(_:)`` to load other loadables with this attempt's intent. The task
  /// running it is cancelled by ``cancelLoad()``, so cooperative work can stop early.
  ///
  /// - Returns: the new content.
  /// - Throws: any error; the loadable then fails with it and keeps its previous content.
  open func performLoad() async throws -> Content {
    switch operation {
    case .overridden:
      preconditionFailure("\(type(of: self)) must override performLoad() or be created with a closure")
    case .async(let operation): return try await operation()
    case .sync(let operation): return try operation()
    case .constant(let box): return ContentBox<Content>.unbox(box)
    case .failure(let error): throw error
    }
  }

  /// ``performLoad()``, its content in its ``ContentBox``. A subclass of the library whose
  /// content already comes boxed (`flatMap`'s: the inner loadable's delivery) overrides it, to
  /// hand the box on: boxing here, in unspecialized code, looks up `ContentBox<Content>`'s
  /// metadata at run time (~330 instructions an attempt).
  nonisolated(nonsending) func performLoadBoxed() async throws -> AnyContentBox {
    ContentBox(try await performLoad())
  }

  // MARK: - State

  /// The current status. Observable.
  public var loadStatus: LoadStatus {
    let (status, registrar) = withState { ($0.status, $0.registrarForAccess()) }
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadStatus)
    return status
  }

  /// The error of the last attempt; non-`nil` exactly when ``loadStatus`` is ``LoadStatus/failed``.
  /// Observable.
  public var loadError: (any Error)? {
    let (error, registrar) = withState { ($0.status == .failed ? $0.error : nil, $0.registrarForAccess()) }
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadError)
    return error
  }

  /// The content of the last successful attempt. It stays readable during a refresh and after a
  /// failed one. Observable.
  ///
  /// Inlinable, so that reading it — what a view does on every draw — is specialized for the
  /// caller's `Content`: in the library's unspecialized code the read looked up the metadata of
  /// `Content?`, `ContentBox<Content>` and a tuple at run time (2,243 instructions a read).
  @inlinable
  public final var content: Content? {
    let (box, registrar) = withState { ($0.contentBox, $0.registrarForAccess()) }
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.content)
    return box.map(ContentBox<Content>.unbox)
  }

  /// Status, content and error read together, in one step. Inlinable, as ``content`` is.
  @inlinable
  public final var snapshot: LoadSnapshot<Content> {
    let (snapshot, registrar) = withState { ($0.snapshot(as: Content.self), $0.registrarForAccess()) }
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadStatus)
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.content)
    registrar.registrar.access(ObservedProperties.shared, keyPath: ObservedProperties.loadError)
    return snapshot
  }

  /// How many callers and completion handlers wait for the running attempt (for tests).
  var waiterCount: Int { state.withLock(owner: self) { $0.attempt?.waitingCount ?? 0 } }

  /// Whether the running attempt's task (or driver) is stored: until then a cancel reaches it only
  /// once the launcher stores it (``LoadStateMachine/attach(_:to:)``), for tests.
  var runnerIsAttachedForTesting: Bool { state.withLock(owner: self) { $0.attempt.map { !$0.runner.isNone } ?? false } }

  /// The attempts' tasks waiting for the gate, for tests.
  var gateQueueCountForTesting: Int { state.withLock(owner: self) { $0.extras?.gateQueue.count ?? 0 } }

  /// Whether there is usable content. The default is `content != nil`; override it to add
  /// conditions (an empty list, an expired token).
  open var isContentAvailable: Bool { content != nil }

  /// Whether ``syncIfNeeded()`` and ``fetchIfNeeded()`` should start an attempt.
  ///
  /// The default is `true` when the content is not available, the status is ``LoadStatus/failed``
  /// or ``LoadStatus/notLoaded``, or the content is stale because a parent's content changed.
  open var needsSync: Bool {
    let available = isContentAvailable
    let status = loadStatus
    return !available || status == .failed || status == .notLoaded || hasStaleSources
  }

  // MARK: - ArcGIS-style loading

  /// Loads the resource, joining an attempt in progress.
  ///
  /// Returns at once when loaded; throws the stored error at once when failed (use
  /// ``retryLoad()`` to try again). Cancelling the calling task makes this call throw
  /// `CancellationError` at once, while the shared attempt goes on for the other callers.
  @inlinable
  nonisolated(nonsending) public final func load() async throws {
    if statusMirror.load(ordering: .acquiring) == LoadStatus.loaded.code { return }
    _ = try await request(.load)
  }

  /// Loads the resource, starting a new attempt when it failed.
  ///
  /// On a loaded resource this returns at once without reloading; use ``fetch()`` to refresh.
  @inlinable
  nonisolated(nonsending) public final func retryLoad() async throws {
    if statusMirror.load(ordering: .acquiring) == LoadStatus.loaded.code { return }
    _ = try await request(.retry)
  }

  /// Cancels the running attempt.
  ///
  /// The loadable fails with `CancellationError`, every caller waiting for it throws
  /// `CancellationError`, and the task running ``performLoad()`` is cancelled. A result that
  /// arrives afterwards is dropped. Required dependencies whose attempts this attempt started and
  /// that nobody else wants are cancelled too, and go back to their state before the attempt.
  /// Does nothing when no attempt is running.
  public final func cancelLoad() {
    let effects = withState { $0.cancel() }
    perform(consume effects)
  }

  /// Calls `completion` once the resource has loaded or failed, as ``load()`` does.
  ///
  /// When the answer is already known, `completion` runs before this method returns; otherwise it
  /// runs later, on the task that ran the attempt, never under a lock — and never inside this
  /// call: when something it sets off ends the attempt on this thread (an observer of the status
  /// change that cancels it), `completion` runs on a task of its own once the call returned.
  public final func load(completion: @escaping @Sendable ((any Error)?) -> Void) {
    submit(.load, completion: completion)
  }

  /// Calls `completion` once the resource has loaded or failed, as ``retryLoad()`` does.
  public final func retryLoad(completion: @escaping @Sendable ((any Error)?) -> Void) {
    submit(.retry, completion: completion)
  }

  // MARK: - MMMLoadable-style syncing

  /// Starts an attempt unless one is running; on a loaded resource it starts a refresh that keeps
  /// the old content readable. Does not wait.
  public final func sync() {
    submit(.sync, completion: nil)
  }

  /// Like ``sync()``, but a loaded resource refreshes only when ``needsSync`` is `true`.
  public final func syncIfNeeded() {
    submit(.syncIfNeeded, completion: nil)
  }

  /// Loads or refreshes the resource and returns its content.
  ///
  /// Joins a running attempt; otherwise starts one, refreshing loaded content.
  /// - Throws: the attempt's error, `CancellationError`, or ``LoadableError/noContent`` when the
  ///   attempt succeeded but ``isContentAvailable`` is `false`.
  nonisolated(nonsending) public final func fetch() async throws -> Content {
    try checkedContent(try await request(.fetch).content(as: Content.self))
  }

  /// Returns the content at once when ``needsSync`` is `false`; otherwise loads it as
  /// ``fetch()`` does.
  @inlinable
  nonisolated(nonsending) public final func fetchIfNeeded() async throws -> Content {
    // A plain AsyncLoadable cannot have overridden needsSync or isContentAvailable, so their
    // defaults can be evaluated in the same single read as the content.
    if type(of: self) == AsyncLoadable<Content>.self, let content = loadedContent() { return content }
    return try await fetchIfNeededSlowly()
  }

  @usableFromInline
  nonisolated(nonsending) final func fetchIfNeededSlowly() async throws -> Content {
    try checkedContent(try await request(.fetchIfNeeded).content(as: Content.self))
  }

  /// The content when the status is `.loaded` and there is content, in one read.
  ///
  /// Inlinable so that it is specialized for the caller's `Content`: unspecialized, each call
  /// looks up the metadata of the state, `Optional<Content>` and the `Mutex` at run time.
  @inlinable
  final func loadedContent() -> Content? {
    state.withLock(owner: self) { $0.status == .loaded ? $0.content(as: Content.self) : nil }
  }

  func checkedContent(_ content: Content?) throws -> Content {
    guard let content, isContentAvailable else { throw LoadableError.noContent }
    return content
  }

  // MARK: - Hooks for the library's subclasses

  // Overridden by derived loadables, a ContentLoader key's loadable and a paged loadable; the
  // request path (AsyncLoadable+Requests.swift) and the phases of the loadable's effects
  // (Engine/AsyncLoadable+Perform.swift) call them.

  /// A caller — a dependent's attempt (`context`) or a plain caller (`nil`) — is about to wait for
  /// this loadable's attempt. Returns whether ``callerStoppedWaiting(_:)`` must be called when
  /// its wait ends: `false` here; a ``ContentLoader`` key under a load limit ranks its load by
  /// the demand of whoever waits for it (SPEC §5).
  func callerWillWait(_ context: AttemptContext?) -> Bool { false }

  /// The wait a ``callerWillWait(_:)`` that returned `true` announced is over.
  func callerStoppedWaiting(_ context: AttemptContext?) {}

  /// Starts `attempt` without a task of its own, if this loadable can (a `map` or a `zip`, see
  /// `CombinedLoadable`); `false` when it must run on a task.
  func launchWithoutTask(_ attempt: LoadStateMachine.Attempt, probe: AttemptProbe?) -> Bool { false }

  /// Whether ``performLoad()`` runs one call at a time, an attempt's task waiting at the gate for
  /// the task of an attempt that was cancelled but whose work has not returned (SPEC §1). `true`;
  /// a `ContentLoader` key's loadable, whose load is a function of its key, says `false` (SPEC
  /// §5: nothing waits behind a stale or abandoned load).
  var runsOneAttemptAtATime: Bool { true }

  /// The end of an attempt started by ``launchWithoutTask(_:probe:)``, which only a subclass that
  /// overrides both has.
  func dependenciesDecided(
    _ outcome: DependencyGroup.Outcome, attempt: RunningAttempt, context: AttemptContext, probe: AttemptProbe?
  ) {
    assertionFailure("\(type(of: self)) started an attempt without a task but cannot end one")
  }

  /// Whether content this loadable derived from its sources is out of date; derived loadables
  /// override it (see ``needsSync``).
  var hasStaleSources: Bool { false }

  /// What the dependency tree shows under this loadable besides its dependencies: a paged
  /// loadable's page loads under way or failed. None by default.
  var treeExtras: [(loadable: any Loadable, kind: DependencyKind)] { [] }

  /// Called after an attempt's outcome was stored (or the attempt was cancelled or undone) and
  /// observers were told, before its callers resume. A live view applies the source changes that
  /// arrived while the attempt ran.
  func attemptDidEnd(committed: Bool) {}

  /// Called after observers were told of a status change, outside every lock, by whoever made
  /// the change (so possibly on two threads at once): a keyed loadable tells its loader, which
  /// reads the current state each time.
  func statusDidChange() {}
}
