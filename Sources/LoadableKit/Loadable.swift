/// The state of a ``Loadable`` resource.
///
/// ```
/// notLoaded ──load()──▶ loading ──success──▶ loaded
///                          │  ▲                 │ sync() / fetch()
///                  failure │  │ retryLoad()     ▼
///                          ▼  │              loading (old content kept)
///                         failed
/// ```
public enum LoadStatus: Sendable, Hashable, CustomStringConvertible {
  /// Nothing has asked the resource to load yet.
  case notLoaded
  /// An attempt is running; every caller that asks now shares it.
  case loading
  /// The last attempt succeeded.
  case loaded
  /// The last attempt failed or was cancelled; `loadError` says why. The failure is sticky until
  /// `retryLoad()` (or a refresh) starts a new attempt.
  case failed

  /// The case name, such as `"loading"`.
  public var description: String {
    switch self {
    case .notLoaded: "notLoaded"
    case .loading: "loading"
    case .loaded: "loaded"
    case .failed: "failed"
    }
  }
}

/// A resource that loads its state asynchronously, shares one attempt among all callers, and
/// remembers a failure until it is retried.
///
/// This is the ArcGIS Runtime "loadable" pattern. ``AsyncLoadable`` implements it; adopt the
/// protocol directly only to plug an existing type into a dependency graph (see
/// ``AsyncLoadable/addDependency(_:kind:)``).
///
/// The async requirements are `nonisolated(nonsending)`: they run on the caller's executor, so a
/// caller on the main actor is not moved to another thread, and a loaded resource answers without
/// a hop.
public protocol Loadable: AnyObject, Sendable {
  /// The current status.
  var loadStatus: LoadStatus { get }
  /// The error of the last attempt; non-`nil` exactly when ``loadStatus`` is ``LoadStatus/failed``.
  var loadError: (any Error)? { get }
  /// Loads the resource if it has not loaded yet, joins an attempt in progress, and returns at
  /// once when it is loaded. When the resource failed, throws the stored error without retrying.
  nonisolated(nonsending) func load() async throws
  /// Like ``load()``, but starts a new attempt when the resource failed.
  nonisolated(nonsending) func retryLoad() async throws
  /// Cancels the attempt in progress: the resource fails with `CancellationError`, as does every
  /// caller waiting for it.
  func cancelLoad()
}
