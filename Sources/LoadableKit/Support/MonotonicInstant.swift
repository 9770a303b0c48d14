#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A reading of the system's monotonic clock in nanoseconds, for timing attempts.
///
/// Every attempt reads the clock when it starts and when it ends, for the load times of
/// ``AsyncLoadable/dependencyTree(showingDurations:)``. `ContinuousClock.now` cost 47 ns a read on
/// this project's machine, and the `Duration` between two instants another 18 (128-bit
/// arithmetic): about a tenth of a `map` node's load. `clock_gettime` read directly costs 33 ns,
/// and the difference of two readings is one subtraction; the `Duration` is made only when the
/// tree is written. (`CLOCK_MONOTONIC` does not advance while the system sleeps; neither does an
/// attempt's work.)
struct MonotonicInstant {
  var nanoseconds: UInt64

  @inline(__always) static var now: MonotonicInstant {
    #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
      var time = timespec()
      clock_gettime(CLOCK_MONOTONIC, &time)
      return MonotonicInstant(nanoseconds: UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec))
    #else
      let (seconds, attoseconds) = origin.duration(to: .now).components
      return MonotonicInstant(nanoseconds: UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000))
    #endif
  }

  #if !(canImport(Glibc) || canImport(Musl) || canImport(Darwin))
    private static let origin = ContinuousClock.now
  #endif

  /// Nanoseconds from `self` to `later` (zero if `later` is earlier).
  @inline(__always) func nanoseconds(to later: MonotonicInstant) -> UInt64 {
    later.nanoseconds >= nanoseconds ? later.nanoseconds &- nanoseconds : 0
  }
}
