#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// What the library keeps for each thread: the ``Trampoline``'s depth and queue, the links
/// that a `deinit` defers (``DeferredRelease``), and whether code runs outside every attempt. Only its own thread touches it, synchronously:
/// no lock, and no dynamic exclusivity checks.
final class PerThread {
  /// How many trampoline runs are in progress on this thread, one inside the other.
  @exclusivity(unchecked) var trampolineDepth = 0
  /// Work past the trampoline's depth, for the outermost run to run.
  @exclusivity(unchecked) var trampolineQueue: [() -> Void] = []
  /// Links to release once the outermost `deinit` on this thread gets to them.
  @exclusivity(unchecked) var releaseQueue: [Any] = []
  /// Whether a `deinit` on this thread is releasing the queue.
  @exclusivity(unchecked) var isReleasing = false
  /// How many ``AttemptContext/outside(_:)`` blocks are running on this thread, one inside the
  /// other: inside one, no attempt is the current task's (see there).
  @exclusivity(unchecked) var outsideDepth = 0

  /// This thread's state, made on first use and released with the thread.
  static var current: PerThread {
    if let pointer = pthread_getspecific(key) {
      return Unmanaged<PerThread>.fromOpaque(pointer).takeUnretainedValue()
    }
    let state = PerThread()
    pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
    return state
  }

  private static let key: pthread_key_t = {
    var key = pthread_key_t()
    #if canImport(Darwin)
      pthread_key_create(&key) { Unmanaged<PerThread>.fromOpaque($0).release() }
    #else
      pthread_key_create(&key) { pointer in
        if let pointer { Unmanaged<PerThread>.fromOpaque(pointer).release() }
      }
    #endif
    return key
  }()
}
