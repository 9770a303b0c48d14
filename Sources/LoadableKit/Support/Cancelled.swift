/// Swift's `CancellationError`, boxed once.
///
/// An error travels as `any Error`, and each `CancellationError()` converted to one allocates
/// its box (32 bytes). The engine's commonest failures are cancellations — an attempt whose task
/// starts after it was cancelled (a list's key scrolled away), a caller that leaves — and they
/// share this one box: a retain instead of an allocation. It is a `CancellationError` like any
/// other (`error is CancellationError`); nothing tells two of them apart.
enum Cancelled {
  static let error: any Error = CancellationError()
}
