import LoadableKit
import Synchronization
import Testing

struct Boom: Error, Equatable, CustomStringConvertible {
  var code: Int
  var description: String { "Boom \(code)" }
}

/// Waits, yielding, until `condition` holds (the instruments hear of a cancelled attempt's end
/// when its task returns, just after the caller was told).
func eventually(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
  for _ in 0..<200_000 {
    if condition() { return }
    await Task.yield()
  }
  Issue.record("condition never became true", sourceLocation: sourceLocation)
}

/// A loadable that fails `failures` times, then returns `value`.
func flaky(_ name: String, failures: Int, value: String = "ok") -> AsyncLoadable<String> {
  let left = Mutex(failures)
  return AsyncLoadable(name: name) { () throws -> String in
    try left.withLock { left in
      if left > 0 {
        left -= 1
        throw Boom(code: 503)
      }
    }
    return value
  }
}
