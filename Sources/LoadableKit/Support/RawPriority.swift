/// An optional `TaskPriority`, kept as its raw value: `0` for none.
///
/// `TaskPriority` is a resilient type of the Concurrency module, so a `TaskPriority?` is made,
/// copied, tested and destroyed through the value witnesses of `Optional<TaskPriority>`, whose
/// metadata is looked up at run time: about 600 instructions a `map` node's load, where the engine
/// passed "no priority" through four places. The engine keeps this instead, and makes a
/// `TaskPriority` only where it starts or escalates a task.
struct RawPriority: Comparable {
  /// `TaskPriority`'s raw value, or `0` (below every priority) for none.
  var rawValue: UInt8

  /// No priority.
  static var none: RawPriority { RawPriority(rawValue: 0) }

  init(rawValue: UInt8) { self.rawValue = rawValue }

  /// A priority that is there: no optional made and tested.
  init(_ priority: TaskPriority) { rawValue = priority.rawValue }

  var isNone: Bool { rawValue == 0 }

  /// Calls `body` with the priority, unless there is none; no `TaskPriority?` is made.
  @inline(__always) func ifSome(_ body: (TaskPriority) -> Void) {
    if !isNone { body(TaskPriority(rawValue: rawValue)) }
  }

  static func < (lhs: RawPriority, rhs: RawPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
