import Synchronization

/// The library's one source of identifiers: attempts, waiters of every kind (a loadable's, a
/// job's, a job manager's), observers, claims and their sinks, a loader's attempt and refresh
/// marks.
///
/// Identifiers are unique in the process and increasing: one taken after another, in the same
/// lock or on the same thread, is larger. An observer list relies on it (an observer added later
/// has a larger identifier), and so do a loader's marks (`attemptMark > refreshMark`: the attempt
/// started after the refresh was asked for).
private let uniqueIDs = Atomic<UInt64>(0)

/// A new process-wide unique, increasing identifier; never 0.
@usableFromInline
func nextUniqueID() -> UInt64 {
  uniqueIDs.wrappingAdd(1, ordering: .relaxed).newValue
}
