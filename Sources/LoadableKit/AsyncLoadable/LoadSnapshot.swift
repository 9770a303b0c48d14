/// The status, content and error of a loadable read in one atomic step.
public struct LoadSnapshot<Content: Sendable>: Sendable {
  /// The status at the moment of the read.
  public var status: LoadStatus
  /// The content at the moment of the read; it survives refreshes and failed refreshes.
  public var content: Content?
  /// The error at the moment of the read; non-`nil` exactly when `status == .failed`.
  public var error: (any Error)?

  @usableFromInline init(status: LoadStatus, content: Content?, error: (any Error)?) {
    self.status = status
    self.content = content
    self.error = error
  }
}
