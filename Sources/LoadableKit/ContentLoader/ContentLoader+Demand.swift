/// Demand flows upstream to a keyed load under a limit (SPEC §5): a key of a loader with
/// `maximumConcurrentLoads` that other attempts wait for is ranked in the loader's queue by the
/// highest demand of whoever waits for it — its claims, its plain callers (as
/// ``ClaimPriority/visible``) and each dependent attempt at that attempt's own demand — and drops
/// back when that demand goes.
///
/// A dependent's demand is, for a key of a loader, the key's load priority (the same rule, one
/// level down); for any other attempt, its task's priority. When a key's load priority changes,
/// the key passes its new demand to the keys its running attempt waits for
/// (``ContentLoader/KeyedLoadable/passDemandUpstream()``), each on the trampoline, so a long chain
/// of loaders is not walked recursively. Each update carries the dependent's own count of
/// changes, so one that arrives late never undoes a newer one.
protocol DemandRanked: AnyObject, Sendable {
  /// The demand this key's load carries to what it waits for, and how many times it changed (an
  /// order for its updates).
  var currentDemand: (priority: ClaimPriority, version: UInt64) { get }
  /// The attempt `dependent` waits for this key's load with a new demand.
  func dependentDemandChanged(_ dependent: AttemptContext)
  /// `dependent`, an attempt that is no key (its demand is its task's priority), had its task
  /// raised to `priority` while it waits for this key's load.
  func dependentRaised(_ dependent: AttemptContext, to priority: TaskPriority)
}

/// Who waits for a key's running load, by demand (under the loader's lock). Kept only while
/// somebody waits; counts, so a key's priority is read in O(1) however many wait.
struct WaitingDemand {
  struct Dependent {
    var priority: ClaimPriority
    var version: UInt64
    /// Waits of the same attempt (its child tasks may wait for the key together).
    var waits: Int
  }

  /// Callers of the key's loadable that are no attempt's dependency.
  var plainCallers = 0
  var dependents: [ObjectIdentifier: Dependent] = [:]
  /// The dependents' priorities, counted.
  var dependentsAt = PriorityCounts()

  var isEmpty: Bool { plainCallers == 0 && dependents.isEmpty }

  mutating func join(_ id: ObjectIdentifier, priority: ClaimPriority, version: UInt64) {
    if var dependent = dependents[id] {
      dependent.waits += 1
      dependents[id] = dependent
      update(id, to: priority, version: version)
      return
    }
    dependents[id] = Dependent(priority: priority, version: version, waits: 1)
    dependentsAt[priority] += 1
  }

  mutating func leave(_ id: ObjectIdentifier) {
    guard var dependent = dependents[id] else { return }
    dependent.waits -= 1
    if dependent.waits > 0 {
      dependents[id] = dependent
      return
    }
    dependents[id] = nil
    dependentsAt[dependent.priority] -= 1
  }

  /// A dependent's demand changed; an update older than the one recorded is ignored.
  mutating func update(_ id: ObjectIdentifier, to priority: ClaimPriority, version: UInt64) {
    guard var dependent = dependents[id], version >= dependent.version else { return }
    if priority != dependent.priority {
      dependentsAt[dependent.priority] -= 1
      dependentsAt[priority] += 1
      dependent.priority = priority
    }
    dependent.version = version
    dependents[id] = dependent
  }
}

extension ClaimPriority {
  /// The rank of a task's priority, for an attempt that waits without being a key: the priority
  /// a claim's load is raised to maps back to that claim's rank.
  init(demandOf priority: TaskPriority) {
    self =
      priority >= ClaimPriority.visible.taskPriority ? .visible
      : priority >= ClaimPriority.prefetch.taskPriority ? .prefetch : .background
  }
}

extension ContentLoader.KeyedLoadable: DemandRanked {
  var currentDemand: (priority: ClaimPriority, version: UInt64) {
    loader?.withState { _ in (loadPriority, demandVersion) } ?? (.visible, 0)
  }

  /// The demand `context`'s attempt waits with: a key's load priority, or its task's priority.
  static func demand(of context: AttemptContext) -> (priority: ClaimPriority, version: UInt64) {
    if let key = context.owner as? any DemandRanked { return key.currentDemand }
    return (ClaimPriority(demandOf: Task.currentPriority), 0)
  }

  /// ``AsyncLoadable/callerWillWait(_:)``: records the caller's demand, under a load limit.
  func demandWillWait(_ context: AttemptContext?) -> Bool {
    guard let loader, loader.limiter != nil else { return false }
    let demand = context.map(Self.demand(of:))
    loader.changeDemand(on: self) { waiting in
      if let context, let demand {
        waiting.join(ObjectIdentifier(context), priority: demand.priority, version: demand.version)
      } else {
        waiting.plainCallers += 1
      }
    }
    return true
  }

  /// ``AsyncLoadable/callerStoppedWaiting(_:)``.
  func demandStoppedWaiting(_ context: AttemptContext?) {
    loader?.changeDemand(on: self) { waiting in
      if let context { waiting.leave(ObjectIdentifier(context)) } else { waiting.plainCallers -= 1 }
    }
  }

  func dependentDemandChanged(_ dependent: AttemptContext) {
    let demand = Self.demand(of: dependent)
    loader?.changeDemand(on: self) { $0.update(ObjectIdentifier(dependent), to: demand.priority, version: demand.version) }
  }

  /// A plain loadable's attempt between two keys recorded its demand, its task's priority, when it
  /// joined; when a raise of the key above reaches its task (its wait's escalation handler), the
  /// recorded demand rises with it — never falls: demand passes through a plain loadable only
  /// upward. (Without it, a key whose slot is kept, raised while its plain dependency waited for a
  /// key queued behind it, kept that key at the old rank, unable to borrow the slot: both waited
  /// for good.)
  func dependentRaised(_ dependent: AttemptContext, to priority: TaskPriority) {
    let raised = ClaimPriority(demandOf: priority)
    loader?.changeDemand(on: self) { waiting in
      let id = ObjectIdentifier(dependent)
      guard let recorded = waiting.dependents[id], raised > recorded.priority else { return }
      waiting.update(id, to: raised, version: recorded.version)
    }
  }

  /// Tells the keys this key's running attempt waits for that its demand changed (after the
  /// loader's lock).
  func passDemandUpstream() {
    guard let context = runningAttemptContext else { return }
    for case let upstream as any DemandRanked in context.waitTargets {
      Trampoline.run { upstream.dependentDemandChanged(context) }
    }
  }
}

extension ContentLoader {
  /// Applies `change` to who waits for `entry`'s load; the load moves in the queue, and passes
  /// its demand on, when its priority changed.
  func changeDemand(on entry: KeyedLoadable, _ change: (inout WaitingDemand) -> Void) {
    let effects = withState { state -> State.Effects in
      var effects = State.Effects()
      let before = entry.loadPriority
      var waiting = entry.waiting ?? WaitingDemand()
      change(&waiting)
      entry.waiting = waiting.isEmpty ? nil : waiting
      state.reprioritized(entry, from: before, &effects)
      return effects
    }
    perform(consume effects)
  }
}
