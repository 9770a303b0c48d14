import Synchronization

extension ContentLoader {
  /// Where a key's load delivers values before its result: a disk copy read asynchronously, a
  /// low-resolution preview. Given to the `load` closure of
  /// ``init(name:gracePeriod:idleTimeout:maximumIdleCount:staleAfter:maximumConcurrentLoads:cost:totalCostLimit:loadOptions:clock:instrument:taskExecutor:existingValue:load:)-(_,_,_,_,_,_,_,_,_,_,_,_,_,(Key,InterimValues)->(Value,Version))``.
  ///
  /// A value delivered is shown to the key's claims and ``ContentLoader/events`` as a prior value
  /// (``ContentLoader/Event/loadingWithPriorValue(_:_:_:)``), with ``LoadStatus/loading``: the
  /// load goes on. The version rule holds between interim values, the value the key shows and
  /// the load's result: an interim value not newer than the value shown is dropped, and a result
  /// not newer than the interim value shown is dropped too — the load then ends with the interim
  /// value as its result (``LoadStatus/loaded``), as it does with a prior value newer than its
  /// result. An interim value stays the key's value until a newer one replaces it, like a prior
  /// value: a load that fails or is cancelled after delivering it leaves it shown.
  ///
  /// Only the load that was given it delivers through it: once that load has returned, was
  /// cancelled, or was superseded (a refresh, a local write, a removal), a value delivered is
  /// ignored, never shown. The key's loadable (``ContentLoader/loadable(for:)``) does not hold
  /// interim values as content, only the result.
  ///
  /// It holds its key's entry only until the load returns, and may be used from any thread or
  /// task.
  public struct InterimValues: Sendable {
    let link: InterimLink
    let attempt: UInt64?

    @usableFromInline init(link: InterimLink, attempt: UInt64?) {
      self.link = link
      self.attempt = attempt
    }

    /// Shows `value`, with its version, as the key's value while its load runs.
    ///
    /// Called outside any of the loader's locks; the loader's `cost` closure, if any, is called
    /// once for `value`. The claims are told before this method returns, unless another thread
    /// is delivering the loader's notifications at that moment (then that thread tells them, in
    /// order).
    ///
    /// - Returns: `true` when the value is shown; `false` when it was dropped: not newer than the
    ///   value the key shows, or too late (the load returned, was cancelled or was superseded).
    @discardableResult
    public func deliver(_ value: Value, version: Version) -> Bool {
      link.entry?.deliverInterim(value, version: version, attempt: attempt) ?? false
    }
  }

  /// The data source's load: the closure of the initializer it was given to, called as it is (no
  /// wrapper closure a load).
  @usableFromInline
  enum DataSourceLoad: Sendable {
    case plain(@Sendable (Key) async throws -> (value: Value, version: Version))
    case withInterimValues(@Sendable (Key, InterimValues) async throws -> (value: Value, version: Version))
  }

  /// How ``InterimValues`` reaches its key's entry: strongly, while the load runs (its task holds
  /// the entry then anyway), and not at all once it returned.
  ///
  /// Not a `weak` reference: the first weak reference to an object gives it a side table, an
  /// allocation, and every retain and release of it from then on takes the runtime's slow path
  /// (about 50 instructions more each; a claim's begin and end retain and release its key's entry).
  @usableFromInline
  final class InterimLink: Sendable {
    private let held: Mutex<KeyedLoadable?>

    @usableFromInline init(_ entry: KeyedLoadable) { held = Mutex(entry) }

    var entry: KeyedLoadable? { held.withLock(owner: self) { $0 } }

    /// Lets go of the entry; returned to be released by the caller, after this lock.
    @usableFromInline func cut() -> KeyedLoadable? {
      held.withLock(owner: self) { entry in
        defer { entry = nil }
        return entry
      }
    }
  }
}
