/// Test seams of ``ContentLoader``: internal, unset outside the tests that need them.
enum ContentLoaderSeams {
  /// Called by a refresh of a claimed key, under the loader's lock, right before it acts on the
  /// key's attempt: a test starts a load on another thread there, to land in the moment between
  /// the refresh starting and acting, which no schedule of tasks can reach.
  @TaskLocal static var beforeRefreshActs: (@Sendable () -> Void)?
}
