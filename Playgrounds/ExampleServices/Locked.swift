import Foundation

/// A value behind a lock, for the playgrounds' own shared state.
///
/// It does what `Synchronization.Mutex` does, on `NSLock` (a pthread mutex), because `.ci/run`
/// also runs the playgrounds under ThreadSanitizer, and on Linux ThreadSanitizer cannot see
/// `Mutex`'s locking (the standard library is not instrumented): it would report every access to
/// a `Mutex`-protected value as a race.
public final class Locked<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value

  public init(_ value: Value) {
    self.value = value
  }

  /// Runs `body` with the value, holding the lock.
  public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
