import Synchronization

/// The running attempt of a loadable: its intent, the dependencies that already received that
/// intent, and the waits that are the attempt's edges in the wait-for graph.
///
/// The context travels explicitly where the library loads dependencies (declared dependencies,
/// combinators, ``AsyncLoadable/loadDependency(_:)``, which finds the running attempt of the
/// loadable it is called on). A task-local also makes it visible to a direct `load()` that
/// ``AsyncLoadable/performLoad()`` makes *on the attempt's own task* (or on the child that a
/// timeout runs the work on, ``runningAsAttemptsWork(_:_:)``); tasks the user starts from
/// there inherit the task-local but are not part of the attempt, so ``current`` ignores it on any
/// other task. Only real waits of the attempt are edges.
///
/// ## The wait-for graph
///
/// An edge "attempt of `a` waits for `b`" exists while such a wait is in progress; it belongs to
/// the attempt and is gone when the wait returns. Adding an edge first records it, then walks the
/// waits from `b` — each loadable's running attempt and what that attempt waits for — looking for
/// `a`. A ``DependencyGroup`` (a `zip`'s wait for its inputs, an attempt's for its declared
/// dependencies) is recorded once, and keeps its own edges: each of its waits is an edge until it
/// is answered, under the group's lock, so a wide group costs the context no hash and no lock
/// per wait. The walk costs the part of the graph reachable from `b`, takes one short lock at a time
/// (never a process-wide one), and is iterative. Of two waits that close a cycle at the same
/// moment, each records its edge before it walks, so at least one of them sees the other's.
final class AttemptContext: Sendable {
  @TaskLocal private static var bound: AttemptContext?

  /// The attempt running on this very task, if any.
  static var current: AttemptContext? {
    guard PerThread.current.pointee.outsideDepth == 0, let context = bound, !context.hasEnded.load(ordering: .acquiring)
    else { return nil }
    let task = currentTaskIdentity()
    guard context.task == task || (task != 0 && context.workTask.load(ordering: .relaxed) == task) else { return nil }
    return context
  }

  /// Runs `work`, the attempt's work on a child task of the attempt's (a timeout races it against
  /// the clock), as the attempt's own: ``current`` is this context there too, so that a direct
  /// `load()` the work makes is the attempt's wait and its dependency, as on the attempt's task.
  /// Called on that child. (One child at a time: a timeout's group waits for its work to stop.)
  static func runningAsAttemptsWork<T>(
    _ context: AttemptContext?, _ work: () async throws -> T
  ) async throws -> T {
    guard let context else { return try await work() }
    let task = currentTaskIdentity()
    context.workTask.store(task, ordering: .relaxed)
    defer { context.workTask.store(0, ordering: .relaxed) }
    return try await work()
  }

  /// Runs `operation` with `context` as the attempt of the current task.
  nonisolated(nonsending) static func run<R>(
    _ context: AttemptContext, _ operation: nonisolated(nonsending) () async throws -> R
  ) async rethrows -> R {
    try await $bound.withValue(context, operation: operation)
  }

  /// Runs `body` outside any attempt: user code that the library calls back (observers,
  /// completion handlers, listeners) and the tasks it starts must not pass for part of the
  /// attempt that happened to trigger them, or their loads would count as that attempt's
  /// dependencies (and could be reported as cycles).
  ///
  /// The body is synchronous, so until it returns this thread runs only code it calls, on this
  /// task (code the library calls back must not run a nested run loop or executor: the
  /// documented known limit), and only an asynchronous ``run(_:_:)`` binds an attempt: a
  /// per-thread count tells ``current`` that it is inside such a block, with no look at the
  /// task-local. Nothing is bound in its place: a task the body starts inherits the attempt's
  /// context, but ``current`` ignores a context on any task but the attempt's own. (Binding
  /// `nil` too cost a read of the task-local, ~125 instructions, each time effects were carried
  /// out outside a block: twice a `ContentLoader` key's claim and release.)
  ///
  /// `thread`: this thread's state, when the caller already read it.
  static func outside<R>(
    on thread: UnsafeMutablePointer<PerThread> = PerThread.current, _ body: () throws -> R
  ) rethrows -> R {
    if thread.pointee.outsideDepth > 0 { return try body() }
    return try counted(on: thread, body)
  }

  /// ``outside(on:_:)`` where the caller knows that no attempt is the current task's, so that the
  /// blocks inside need no look at the task-local: the task of an attempt once its work returned
  /// (its context ended, and any other bound was inherited from another task).
  static func alreadyOutside<R>(_ body: () throws -> R) rethrows -> R {
    assert(current == nil, "alreadyOutside(_:) inside an attempt")
    let thread = PerThread.current
    thread.pointee.attemptTaskDepth += 1
    defer { thread.pointee.attemptTaskDepth -= 1 }
    return try counted(on: thread, body)
  }

  /// Runs `body`, which ends an attempt on a task the library started for it (its own, or one an
  /// attempt without a task ends on), so that attempts without a task which that end completes
  /// may run their transforms here, inline (``isEndingOnAttemptTask``). ``alreadyOutside(_:)``
  /// counts as one too.
  static func endingOnAttemptTask(_ body: () -> Void) {
    let thread = PerThread.current
    thread.pointee.attemptTaskDepth += 1
    body()
    thread.pointee.attemptTaskDepth -= 1
  }

  /// Starts a task, at `priority` (``RawPriority/none``: the caller's), on which `step` ends an
  /// attempt without a task (``endingOnAttemptTask(_:)``).
  @discardableResult
  static func endOnATask(priority: RawPriority = .none, _ step: @escaping @Sendable () -> Void) -> Task<Void, Never> {
    TaskLaunch.start(priority: priority) { endingOnAttemptTask(step) }
  }

  /// Whether this thread is ending an attempt on a task the library started for it: none of a
  /// caller's or a writer's task-locals are bound here (the task is detached), so a `map`'s
  /// transform may run here without a task of its own (SPEC §1). Elsewhere — a writer's synchronous
  /// call that ended a source's attempt (a `ContentLoader` key written while it loads) — it may not.
  static var isEndingOnAttemptTask: Bool { PerThread.current.pointee.attemptTaskDepth > 0 }

  /// Runs `step`, the end of an attempt without a task that may not end on this thread (a `map`
  /// whose source's content a writer's call delivered), on a task of its own. Inside a resume of
  /// waiters out of an attempt's task, the waiters after this one go on on that task too, after
  /// it (``WaiterStore/resumeInOrder(with:on:)``).
  /// The task runs at the attempt's demand (``State/demand``), or the current task's if higher,
  /// and is raised by a raise that comes before it ran `step`.
  static func goOnOnATask(for context: AttemptContext, _ step: @escaping @Sendable () -> Void) {
    let thread = PerThread.current
    if thread.pointee.goingOn != nil {
      thread.pointee.goingOn!.append((context, step))
    } else {
      context.goOn(onATaskAt: max(context.demand, RawPriority(Task.currentPriority)), step)
    }
  }

  /// Runs `step` on a task of its own at `priority`, the task the attempt went on on: a raise that
  /// comes before it ran `step` raises it too (``wentOn(to:at:)``).
  func goOn(onATaskAt priority: RawPriority, _ step: @escaping @Sendable () -> Void) {
    wentOn(to: AttemptContext.endOnATask(priority: priority) { self.runWentOnStep(step) }, at: priority)
  }

  /// The highest priority asked of this attempt without a task (``State/demand``).
  var demand: RawPriority { state.withLock(owner: self) { $0.demand } }

  /// Whether the attempt went on on a task of its own, and until when raises go to it.
  enum WentOn {
    /// It did not: a raise goes to its driver.
    case no
    /// On this task, which has not run its step yet: a raise goes to it too.
    case on(Task<Void, Never>)
    /// Its task ran its step (which may have begun before ``wentOn(to:at:)`` stored the task).
    case ran

    /// The task a raise goes to.
    var task: Task<Void, Never>? {
      if case .on(let task) = self { task } else { nil }
    }
  }

  /// The attempt went on on `task`, started at `priority`: a raise that came since is passed on
  /// to it, and so is each one until it ran its step (``raiseDemand(to:)``) — unless it already
  /// did.
  func wentOn(to task: Task<Void, Never>, at priority: RawPriority) {
    let demand = state.withLock(owner: self) { state -> RawPriority in
      guard case .no = state.wentOn else { return .none }
      state.wentOn = .on(task)
      return state.demand
    }
    if demand > priority { task.escalatePriority(to: TaskPriority(rawValue: demand.rawValue)) }
  }

  /// Runs `step` on the task the attempt went on on; once it ran, raises no longer go to that task.
  func runWentOnStep(_ step: () -> Void) {
    step()
    let was = state.withLock(owner: self) { state -> WentOn in
      let was = state.wentOn
      state.wentOn = .ran
      return was
    }
    _ = consume was  // the task's handle, released after the lock
  }

  /// Records a priority raised for this attempt in its ``State/demand``, for a driver that keeps
  /// no state in the context (a `zip`'s dependency group; a `map`'s wait records it as it passes
  /// the raise on), and passes it on to the task the attempt went on on, if any.
  func raiseDemand(to priority: RawPriority) {
    state.withLock(owner: self) { $0.recordRaise(priority) }?.escalatePriority(to: TaskPriority(rawValue: priority.rawValue))
  }

  /// Runs `body`, user code that the library calls back (observers, completion handlers, a
  /// `map`'s or a `flatMap`'s transform run where its source's attempt ended), as no part of an
  /// attempt's end on its task: a task-local it binds around a write of its own must
  /// not be seen by a transform that write lets run (see ``isEndingOnAttemptTask``).
  @inline(__always)
  static func runningCallbacks<R>(
    on thread: UnsafeMutablePointer<PerThread> = PerThread.current, _ body: () throws -> R
  ) rethrows -> R {
    let depth = thread.pointee.attemptTaskDepth
    guard depth > 0 else { return try body() }
    thread.pointee.attemptTaskDepth = 0
    defer { thread.pointee.attemptTaskDepth = depth }
    return try body()
  }

  /// Lets go of `value`, what the state let go of (the last phase of the one order of effects),
  /// as user code, which a `deinit` it runs is: as an observer, outside any attempt
  /// (``outside(on:_:)``: its loads are no dependencies of an attempt whose `performLoad()` made the
  /// change) and as no part of an attempt's end (``runningCallbacks(on:_:)``: a write it makes inside
  /// a task-local of its own must not let a transform run inline, inside that task-local).
  @inline(__always)
  static func releasingAsCallbacks<T: ~Copyable>(
    _ value: consuming T, on thread: UnsafeMutablePointer<PerThread> = PerThread.current
  ) {
    let depth = thread.pointee.attemptTaskDepth
    thread.pointee.attemptTaskDepth = 0
    thread.pointee.outsideDepth += 1
    _ = consume value
    thread.pointee.outsideDepth -= 1
    thread.pointee.attemptTaskDepth = depth
  }

  /// Runs `body` as a block outside any attempt on `thread` (see ``outside(on:_:)``).
  @inline(__always)
  private static func counted<R>(on thread: UnsafeMutablePointer<PerThread>, _ body: () throws -> R) rethrows -> R {
    thread.pointee.outsideDepth += 1
    defer { thread.pointee.outsideDepth -= 1 }
    return try body()
  }

  let owner: any DependencyNode
  /// The running attempt's identifier, the parent of the attempts it asks for (instruments).
  let attemptID: UInt64
  /// Reports the attempt's retries when an instrument is installed.
  let probe: AttemptProbe?
  /// The task the attempt runs on; 0 for an attempt without a task (a `map`'s or a `zip`'s),
  /// whose context is never bound to a task.
  private let task: UInt
  /// The child task that runs the attempt's work under a timeout while it runs; 0 otherwise
  /// (``runningAsAttemptsWork(_:_:)``). Written and read on that child; read by ``current`` on
  /// any task, which compares it with its own.
  private let workTask = Atomic<UInt>(0)
  let intent: LoadIntent  // beside `hasEnded`: one word's padding for the two
  /// Set when the attempt's work returned: a task that inherited the context, even one that
  /// happens to reuse the attempt's task's address later, is not part of it.
  let hasEnded = Atomic<Bool>(false)
  /// For an attempt without a task: the thread whose call begins its driver (the address of its
  /// ``PerThread`` state) while that `begin` runs; 0 before and after.
  ///
  /// An outcome decided inside that call is told apart by its thread, not by the call's progress:
  /// another thread may decide it meanwhile (a writer's call answering the source the wait just
  /// joined) and is no part of that call.
  private let driverThread = Atomic<UInt>(0)

  /// Runs `begin`, which begins the attempt's driver (its wait for its sources), marked as the
  /// call that started the attempt on this thread (``isBeginningDriverHere``).
  @inline(__always)
  func beginningDriver<R>(_ begin: () -> R) -> R {
    driverThread.store(UInt(bitPattern: PerThread.current), ordering: .relaxed)
    defer { driverThread.store(0, ordering: .releasing) }
    return begin()
  }

  /// Whether this thread is inside the call that begins the driver (``beginningDriver(_:)``): an
  /// outcome decided here is decided inside the call that started the attempt.
  var isBeginningDriverHere: Bool {
    driverThread.load(ordering: .acquiring) == UInt(bitPattern: PerThread.current)
  }

  /// Most attempts have one dependency (a `map`'s source): the first one claimed and the first
  /// wait are stored inline, and a set or a dictionary is built only for a second one. (The empty
  /// ones are made with `init()`, the shared empty storage: an empty literal `[:]` goes through
  /// `init(dictionaryLiteral:)`, some 50 instructions an attempt.)
  struct State {
    /// Dependencies that already received this attempt's intent: the first, then the others.
    var firstClaimed: ObjectIdentifier?
    var moreClaimed = Set<ObjectIdentifier>()
    /// What the attempt waits for now, with how many waits of each are in progress: the first
    /// dependency waited for while it is waited for, then the others.
    var firstWait: (id: ObjectIdentifier, node: any DependencyNode, count: Int)?
    var moreWaits = [ObjectIdentifier: (node: any DependencyNode, count: Int)]()
    /// Groups of waits (``DependencyGroup``), each of which keeps its own edges: the first inline,
    /// then the others.
    var firstGroup: DependencyGroup?
    var moreGroups: [DependencyGroup] = []
    /// The task it went on on (``AttemptContext/goOnOnATask(for:_:)``): a raise that comes before
    /// that task ran its step is passed on to it.
    var wentOn = WentOn.no
    /// The one wait of an attempt without a task that has one source (a `map`'s), while it is
    /// pending: see `AttemptContext+SourceWait.swift`. Its edge is ``firstWait``.
    var sourceWait: SourceWait?
    // The one-byte fields last, after those of `sourceWait`: the state, and so the context, ends
    // 16 bytes sooner in the allocator's rounding (the context 216 → 200 bytes).
    /// The attempt was cancelled (its driver's ``cancel()``): a wait begun after that is not
    /// begun (a `flatMap`'s second wait, for the loadable its transform returned).
    var cancelled = false
    /// A priority raised while no wait was in progress (a `flatMap`'s attempt between its two
    /// waits, while its transform runs): passed on to the next wait as it begins.
    var nextWaitPriority = RawPriority.none
    /// For an attempt without a task: the highest priority asked of it — the call that started
    /// it, and each raise since — at which it goes on on a task of its own when it must
    /// (``AttemptContext/goOnOnATask(for:_:)``).
    var demand = RawPriority.none

    /// Records a raise of the attempt's priority in ``demand``; returns the task it went on on,
    /// which the raise goes to as well (outside the lock).
    mutating func recordRaise(_ priority: RawPriority) -> Task<Void, Never>? {
      if priority > demand { demand = priority }
      return wentOn.task
    }

    /// Whether `id` received the intent.
    func hasClaimed(_ id: ObjectIdentifier) -> Bool {
      firstClaimed == id || (!moreClaimed.isEmpty && moreClaimed.contains(id))
    }

    /// Records that `id` received the intent; `false` when it already had.
    mutating func claim(_ id: ObjectIdentifier) -> Bool {
      guard let first = firstClaimed else {
        firstClaimed = id
        return true
      }
      return first != id && moreClaimed.insert(id).inserted
    }

    mutating func addWait(_ node: any DependencyNode, _ id: ObjectIdentifier) {
      if let first = firstWait, first.id == id {
        firstWait!.count += 1
      } else if firstWait == nil && moreWaits[id] == nil {
        firstWait = (id, node, 1)
      } else if let existing = moreWaits[id] {
        moreWaits[id] = (existing.node, existing.count + 1)
      } else {
        moreWaits[id] = (node, 1)
      }
    }

    /// Ends one wait for `id`; returns the node when it was the last one (to release after the
    /// lock: it may be the last reference to a loadable).
    mutating func removeWait(_ id: ObjectIdentifier) -> (any DependencyNode)? {
      if let first = firstWait, first.id == id {
        if first.count > 1 {
          firstWait!.count -= 1
          return nil
        }
        firstWait = nil
        return first.node
      }
      guard let existing = moreWaits[id] else { return nil }
      if existing.count > 1 {
        moreWaits[id] = (existing.node, existing.count - 1)
        return nil
      }
      return moreWaits.removeValue(forKey: id)?.node
    }

    /// The node of a wait in progress for `id`.
    func waitedNode(_ id: ObjectIdentifier) -> (any DependencyNode)? {
      if let firstWait, firstWait.id == id { return firstWait.node }
      return moreWaits.isEmpty ? nil : moreWaits[id]?.node
    }

    var waitTargets: [any DependencyNode] {
      // Most attempts a walk finds wait for nothing of their own (they wait in a group, or not at
      // all): no array is made for them (a reserved capacity of one was an allocation each).
      if firstWait == nil && moreWaits.isEmpty { return [] }
      var targets: [any DependencyNode] = []
      targets.reserveCapacity(moreWaits.count + 1)
      if let firstWait { targets.append(firstWait.node) }
      targets.append(contentsOf: moreWaits.values.lazy.map(\.node))
      return targets
    }

    /// Removes `group`; returns it (to release after the lock).
    mutating func removeGroup(_ group: DependencyGroup) -> DependencyGroup? {
      if firstGroup === group {
        firstGroup = moreGroups.popLast()  // the first slot is filled while any group is left
        return group
      }
      guard let index = moreGroups.firstIndex(where: { $0 === group }) else { return nil }
      return moreGroups.remove(at: index)
    }
  }
  /// (Not private: the source wait, in its own file, keeps its part of it.)
  let state: Mutex<State>

  /// Made on the attempt's own task, or, `onTask` being `false`, for an attempt without one (the
  /// current task's identity, which costs a look-up, is then of no use).
  /// `demand`: an attempt without a task's first ``State/demand``.
  init(
    owner: any DependencyNode, intent: LoadIntent, attemptID: UInt64, probe: AttemptProbe? = nil, onTask: Bool = true,
    demand: RawPriority = .none
  ) {
    self.state = Mutex(State(demand: demand))
    self.owner = owner
    self.intent = intent
    self.attemptID = attemptID
    self.probe = probe
    self.task = onTask ? currentTaskIdentity() : 0
  }

  /// Whether this context's attempt is still its owner's running attempt (not ended, undone or
  /// replaced), read in the owner's lock.
  var isOwnersRunningAttempt: Bool { owner.runningAttemptContext === self }

  /// Whether `dependency` already received this attempt's intent: a request for it now is a
  /// plain load (``request(for:)``), which a loaded dependency answers at once with its content.
  /// A plain `load()`'s attempt asks every dependency for a plain load: always.
  func hasClaimed(_ dependency: AnyObject) -> Bool {
    if intent == .load { return true }
    return state.withLock(owner: self) { $0.hasClaimed(ObjectIdentifier(dependency)) }
  }

  /// The request for `dependency`: the attempt's intent the first time, a plain load after that.
  ///
  /// A plain `load()`'s attempt asks for a plain load either way, and records nothing: a `zip` of
  /// 10,000 inputs built a set of 10,000 for nothing (some 800 instructions an input).
  func request(for dependency: AnyObject) -> LoadRequest {
    if intent == .load { return .load }
    let first = state.withLock(owner: self) { $0.claim(ObjectIdentifier(dependency)) }
    return first ? intent.dependencyRequest : .load
  }

  // MARK: - Waits

  /// Records that this attempt waits for `target`, unless that closes a cycle.
  ///
  /// - Throws: ``LoadableError/dependencyCycle`` when `target` is, directly or through other
  ///   attempts, waiting for this attempt's loadable.
  func beginWait(on target: any DependencyNode) throws {
    state.withLock(owner: self) { $0.addWait(target, ObjectIdentifier(target)) }
    if reaches(owner, from: target) {
      endWait(on: target)
      throw LoadableError(
        code: .dependencyCycle,
        message: "\(LoadableNames.name(of: owner)) waits for \(LoadableNames.name(of: target)), which is already waiting for it")
    }
  }

  /// The wait for `target` returned.
  ///
  /// `target` as an object, not as a dependency node: a loadable's request ends its wait in a
  /// `defer`, a function of its own, where wrapping itself as `any DependencyNode` looked up its
  /// generic class's metadata at run time (~330 instructions a wait).
  func endWait(on target: AnyObject) {
    // The node is released after the lock: it may be the last reference to a loadable.
    let removed = state.withLock(owner: self) { $0.removeWait(ObjectIdentifier(target)) }
    _ = removed
  }

  /// Records that this attempt waits for the nodes of `group` that it has not answered yet (the
  /// group keeps which: its edges end as its waits are answered, under its own lock, without a
  /// hash or a lock of this context per wait), unless one of `nodes` closes a cycle. Each of
  /// `nodes` is checked after the group is recorded, as ``beginWait(on:)`` checks its one edge.
  ///
  /// - Throws: ``LoadableError/dependencyCycle``, with the group no longer recorded.
  func beginWaits(of group: DependencyGroup, on nodes: [any DependencyNode]) throws {
    state.withLock(owner: self) { state in
      if state.firstGroup == nil { state.firstGroup = group } else { state.moreGroups.append(group) }
    }
    for node in nodes where reaches(owner, from: node) {
      endWaits(of: group)
      throw LoadableError(
        code: .dependencyCycle,
        message: "\(LoadableNames.name(of: owner)) waits for \(LoadableNames.name(of: node)), which is already waiting for it")
    }
  }

  /// `group` has no wait left in progress.
  func endWaits(of group: DependencyGroup) {
    // Released after the lock: the group holds the nodes it waited for.
    let removed = state.withLock(owner: self) { $0.removeGroup(group) }
    _ = removed
  }

  /// What this attempt waits for now: its own waits, then its groups' waits in progress.
  var waitTargets: [any DependencyNode] {
    let (targets, firstGroup, moreGroups) = state.withLock(owner: self) { state in
      (state.waitTargets, state.firstGroup, state.moreGroups)
    }
    guard let firstGroup else { return targets }
    var all = targets
    all.append(contentsOf: firstGroup.waitedNodes)
    for group in moreGroups { all.append(contentsOf: group.waitedNodes) }
    return all
  }

  /// Whether `goal` can be reached from `start` by following running attempts' waits.
  ///
  /// Usually `start` is not loading yet (the wait is about to start it) or waits for nothing:
  /// then nothing is allocated.
  private func reaches(_ goal: any DependencyNode, from start: any DependencyNode) -> Bool {
    let goalID = ObjectIdentifier(goal)
    if ObjectIdentifier(start) == goalID { return true }
    guard let first = start.runningAttemptContext?.waitTargets, !first.isEmpty else { return false }
    var seen = SeenNodes(ObjectIdentifier(start))
    var pending = first
    while let node = pending.popLast() {
      let id = ObjectIdentifier(node)
      if id == goalID { return true }
      guard seen.insert(id), let attempt = node.runningAttemptContext else { continue }
      pending.append(contentsOf: attempt.waitTargets)
    }
    return false
  }
}

/// The nodes a walk of the wait-for graph has seen. Most walks see a few (a `flatMap`'s attempt
/// waits for its inner loadable, whose attempt waits for nothing): the first four are kept
/// inline and compared in turn, and a set is made only for more. A set made for each walk was
/// two allocations and a dozen hashes, 50 walks a real map's graph.
private struct SeenNodes {
  private var inline: (ObjectIdentifier?, ObjectIdentifier?, ObjectIdentifier?, ObjectIdentifier?)
  private var more = Set<ObjectIdentifier>()

  init(_ first: ObjectIdentifier) { inline = (first, nil, nil, nil) }

  /// Adds `id`; `false` when it was already seen.
  mutating func insert(_ id: ObjectIdentifier) -> Bool {
    if inline.0 == id || inline.1 == id || inline.2 == id || inline.3 == id { return false }
    if inline.1 == nil {
      inline.1 = id
    } else if inline.2 == nil {
      inline.2 = id
    } else if inline.3 == nil {
      inline.3 = id
    } else {
      return more.insert(id).inserted
    }
    return true
  }
}

/// The identity of the current task (its address), or 0 outside a task.
///
/// An `UnsafeCurrentTask?` is the task's address, or 0 for none: read as it is. Unwrapped, the
/// optional (of a resilient type of the Concurrency module) was copied through its run-time value
/// witnesses (~116 instructions a call, twice a key's load).
func currentTaskIdentity() -> UInt {
  withUnsafeCurrentTask { unsafeBitCast($0, to: UInt.self) }
}
