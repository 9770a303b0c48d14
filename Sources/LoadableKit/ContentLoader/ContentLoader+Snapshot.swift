extension ContentLoader {
  /// The state of one key, read in one atomic step: its status, the value it shows and that
  /// value's version, and the error of its last load.
  ///
  /// The value is kept through loads and failures: while a load runs (``status`` is
  /// ``LoadStatus/loading``) it is the prior value — the one the data source's `existingValue`
  /// hook supplied, or the result of an earlier load — and after a failed load it is still there,
  /// next to the ``error``.
  ///
  /// | status | value | error |
  /// |---|---|---|
  /// | ``LoadStatus/notLoaded`` | the prior value, if any | `nil` |
  /// | ``LoadStatus/loading`` | the prior or earlier value, if any | `nil` |
  /// | ``LoadStatus/loaded`` | the newest value | `nil` |
  /// | ``LoadStatus/failed`` | the prior or earlier value, if any | why the last load failed |
  public struct Snapshot: Sendable {
    /// The key this snapshot describes.
    public var key: Key
    /// The status of the key's loading.
    public var status: LoadStatus
    /// The value to show: the newest value loaded or supplied as a prior value, or `nil`.
    public var value: Value?
    /// The version of ``value``; `nil` exactly when ``value`` is `nil`.
    public var version: Version?
    /// The error of the last load; non-`nil` exactly when ``status`` is ``LoadStatus/failed``.
    public var error: (any Error)?
    /// Whether the key's load waits for a slot of the loader's `maximumConcurrentLoads`: the key
    /// is ``LoadStatus/loading``, but its data source has not been called yet — a list shows the
    /// row as queued. Always `false` without a limit, and when the key is not loading.
    public var isWaitingForSlot: Bool

    /// Creates a snapshot, for example to stand in for a loader in a preview or a test.
    public init(
      key: Key, status: LoadStatus, value: Value? = nil, version: Version? = nil, error: (any Error)? = nil,
      isWaitingForSlot: Bool = false
    ) {
      self.key = key
      self.status = status
      self.value = value
      self.version = version
      self.error = error
      self.isWaitingForSlot = isWaitingForSlot
    }
  }
}

extension ContentLoader.Snapshot: CustomStringConvertible {
  /// The key, status, and the value, version and error when present, for logs and tests.
  public var description: String {
    var text = "Snapshot(\(key): \(status)"
    if let value { text += ", value: \(value)" }
    if let version { text += ", version: \(version)" }
    if let error { text += ", error: \(error)" }
    if isWaitingForSlot { text += ", waiting for a slot" }
    return text + ")"
  }
}
