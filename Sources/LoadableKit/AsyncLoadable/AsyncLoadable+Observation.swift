import Observation
import Synchronization

// MARK: - Observation

/// The observable properties of every ``AsyncLoadable``, named by key paths that are not generic.
///
/// In the library's unspecialized generic code a key path into the generic class
/// (`\AsyncLoadable<Content>.content`) is instantiated by the runtime on every evaluation — some
/// 20,000 instructions and two allocations — because only key paths without generic arguments are
/// cached. `ObservationRegistrar` tells observations apart by the registrar (one per loadable) and
/// the key path, and does not look at the subject it is handed, so these stored key paths on a
/// stand-in subject observe exactly what `\.content` on `self` would, for the cost of a load.
@usableFromInline
final class ObservedProperties: Observable, Sendable {
  @usableFromInline static let shared = ObservedProperties()
  @usableFromInline static let loadStatus = \ObservedProperties.loadStatus
  @usableFromInline static let loadError = \ObservedProperties.loadError
  @usableFromInline static let content = \ObservedProperties.content

  var loadStatus: Void { () }
  var loadError: Void { () }
  var content: Void { () }
}

extension AsyncLoadable {
  /// How many status changes ``loadStatusUpdates`` keeps for a reader that falls behind: the
  /// newest 32.
  public static var defaultStatusBufferSize: Int { 32 }

  /// An asynchronous sequence of statuses: the current one first, then every change, in order.
  ///
  /// Each access makes a new stream. Its buffer keeps the newest ``defaultStatusBufferSize``
  /// changes: a reader that keeps up sees every change, one that falls behind skips the oldest
  /// (use ``loadStatusUpdates(bufferingPolicy:)`` to choose). The stream ends when the loadable is
  /// deallocated; ending the iteration removes the observer.
  public var loadStatusUpdates: AsyncStream<LoadStatus> {
    loadStatusUpdates(bufferingPolicy: .bufferingNewest(Self.defaultStatusBufferSize))
  }

  /// ``loadStatusUpdates`` with the buffering policy of your choice, as `AsyncStream` offers.
  ///
  /// `.unbounded` keeps every change until it is read: only for a reader that is sure to keep up.
  public func loadStatusUpdates(
    bufferingPolicy: AsyncStream<LoadStatus>.Continuation.BufferingPolicy
  ) -> AsyncStream<LoadStatus> {
    let (stream, continuation) = AsyncStream.makeStream(of: LoadStatus.self, bufferingPolicy: bufferingPolicy)
    let id = addObserver({ continuation.yield($0) }, onEnd: { continuation.finish() })
    continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
    return stream
  }

  /// Calls `handler` with the current status, then with every change, in order, one call at a
  /// time, never under the loadable's lock.
  ///
  /// The handler may call back into the loadable. Observation ends when the returned
  /// ``LoadObservation`` is cancelled or deallocated; a call already under way may still finish.
  public func observeLoadStatus(_ handler: @escaping @Sendable (LoadStatus) -> Void) -> LoadObservation {
    let id = addObserver(handler, onEnd: nil)
    return LoadObservation { [weak self] in self?.removeObserver(id) }
  }

  final func addObserver(_ handler: @escaping ObserverRegistry.Handler, onEnd: (@Sendable () -> Void)?) -> UInt64 {
    let (id, drain) = withState { state in
      let current = state.status
      return state.more.observers.add(.init(handler: handler, onEnd: onEnd), current: current)
    }
    if drain { AttemptContext.outside { drainObservers() } }
    return id
  }

  final func removeObserver(_ id: UInt64) {
    let removed = state.withLock(owner: self) { $0.extras?.observers.entries.removeValue(forKey: id) }
    removed?.onEnd?()
  }
}

/// A token for a status observer registered with ``AsyncLoadable/observeLoadStatus(_:)``.
///
/// The observer ends when you call ``cancel()`` or when the token is deallocated.
public final class LoadObservation: Sendable {
  private let onCancel: Mutex<(@Sendable () -> Void)?>

  init(_ onCancel: @escaping @Sendable () -> Void) {
    self.onCancel = Mutex(onCancel)
  }

  /// Ends the observation. Calling it again does nothing.
  public func cancel() {
    let action = onCancel.withLock(owner: self) { action in
      defer { action = nil }
      return action
    }
    action?()
  }

  deinit { cancel() }
}

extension LoadStatus {
  @usableFromInline var code: UInt8 {
    switch self {
    case .notLoaded: 0
    case .loading: 1
    case .loaded: 2
    case .failed: 3
    }
  }
}
