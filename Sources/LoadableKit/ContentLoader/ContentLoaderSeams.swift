/// Test seams of ``ContentLoader``: internal, unset outside the tests that need them.
///
/// Each is a task-local, set by a test around the work it watches (`seam.withValue(hook) { … }`)
/// and read by the loader only once some test has set it (``GatedTaskLocal``): two are read on
/// every claim's begin and end.
@usableFromInline
enum ContentLoaderSeams {
  /// A seam: a hook a test runs inside the loader.
  typealias Seam = GatedTaskLocal<@Sendable () -> Void>

  /// Called by a refresh of a claimed key, under the loader's lock, right before it acts on the
  /// key's attempt: a test starts a load on another thread there, to land in the moment between
  /// the refresh starting and acting, which no schedule of tasks can reach.
  static let beforeRefreshActs = Seam()

  /// Called by the general path of a claim's end, after the loader's lock was released and
  /// before its effects (cancelling the load only the claims wanted) are performed: a test runs
  /// other tasks there, to land in the moment between the claims letting go of a load and the
  /// load's task being cancelled.
  static let afterClaimEnded = Seam()

  /// Runs ``afterClaimEnded`` if a test set it (for the claim's end, which is inlinable).
  @usableFromInline static func claimEnded() { afterClaimEnded.current?() }

  /// Called when the loader has added the claims' interest to a key's loadable (starting a load
  /// or joining the running one), under the loader's lock, before it reads what the loadable
  /// shows: a test ends that load on another thread there, in a moment no schedule of tasks can
  /// reach.
  static let afterInterestAdded = Seam()

  /// Called by a refresh of a claimed key that found no load running, under the loader's lock,
  /// after it marked the refresh pending and before it adds the claims' interest: a test starts
  /// a load on another thread there, which the refresh then joins instead of starting its own
  /// (the refresh's load follows it).
  static let afterRefreshFoundNoLoad = Seam()

  /// Called by a refresh or a removal that superseded a key's running load, under the loader's
  /// lock, after it reserved a place of the limit for the fresh load and before it reads the
  /// key: a test ends the fresh load on another thread there, in a moment no schedule of tasks
  /// can reach.
  static let afterLoadSuperseded = Seam()
}
