/// How urgently a claim needs its key: the rank of the key's load among the loads waiting for a
/// ``ContentLoader``'s `maximumConcurrentLoads`, and the task priority its load is raised to.
///
/// A key's load runs at the highest priority among its claims; a load nobody claims (a caller of
/// the key's loadable) counts as ``visible``. Change a claim's priority while it lives with
/// ``ContentLoader/Claim/priority``: a row that scrolls from the visible area into the prefetch
/// area loses rank. Swift raises a running task's priority but never lowers it, so "down" means
/// the rank in the queue, not the priority of a task already running.
public enum ClaimPriority: Int, Comparable, Sendable, CaseIterable, CustomStringConvertible {
  /// Work nobody is waiting for.
  case background
  /// Rows about to appear: loaded ahead, never before a visible row.
  case prefetch
  /// Rows on screen. The default.
  case visible

  public static func < (lhs: ClaimPriority, rhs: ClaimPriority) -> Bool { lhs.rawValue < rhs.rawValue }

  /// The task priority a load of this priority is raised to.
  public var taskPriority: TaskPriority {
    switch self {
    case .background: .background
    case .prefetch: .utility
    case .visible: .userInitiated
    }
  }

  public var description: String {
    switch self {
    case .background: "background"
    case .prefetch: "prefetch"
    case .visible: "visible"
    }
  }
}

/// How many claims of a key there are at each priority.
@usableFromInline
struct PriorityCounts: Sendable {
  @usableFromInline var counts: (background: Int, prefetch: Int, visible: Int) = (0, 0, 0)

  @usableFromInline init() {}

  @inlinable
  subscript(priority: ClaimPriority) -> Int {
    get {
      switch priority {
      case .background: counts.background
      case .prefetch: counts.prefetch
      case .visible: counts.visible
      }
    }
    set {
      switch priority {
      case .background: counts.background = newValue
      case .prefetch: counts.prefetch = newValue
      case .visible: counts.visible = newValue
      }
    }
  }

  /// The highest priority with a claim, if any.
  var highest: ClaimPriority? {
    counts.visible > 0 ? .visible : counts.prefetch > 0 ? .prefetch : counts.background > 0 ? .background : nil
  }

  /// ``highest``, or ``ClaimPriority/visible`` without claims: the key's load priority.
  @inlinable
  var highestOrVisible: ClaimPriority {
    counts.visible > 0 ? .visible : counts.prefetch > 0 ? .prefetch : counts.background > 0 ? .background : .visible
  }
}
