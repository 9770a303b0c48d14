import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// What the library keeps for each thread: the ``Trampoline``'s depth and queue, the links
/// that a `deinit` defers (``DeferredRelease``), whether code runs outside every attempt, and the
/// completion handlers held back until the call that registered them returned (``CompletionCall``).
/// Only its own thread touches it, synchronously: no lock.
///
/// A struct in memory of its own, reached through ``current``'s pointer: a `map` node's load
/// reads it seven times, and as an object (retained and released on each read, its key a lazily
/// initialized global) each read cost some 70 instructions.
struct PerThread {
  /// How many trampoline runs are in progress on this thread, one inside the other.
  var trampolineDepth = 0
  /// Work past the trampoline's depth, for the outermost run to run (``Trampoline/Queued``).
  var trampolineQueue: [Trampoline.Queued] = []
  /// Links to release once the outermost `deinit` on this thread gets to them.
  var releaseQueue: [Any] = []
  /// Whether a `deinit` on this thread is releasing the queue.
  var isReleasing = false
  /// Inside ``ContinuationHandoff``'s critical section (with ThreadSanitizer only).
  var inHandoff = false
  /// How many ``AttemptContext/outside(on:_:)`` blocks are running on this thread, one inside the
  /// other: inside one, no attempt is the current task's (see there).
  var outsideDepth = 0
  /// How many ends of attempts on tasks the library started for them are running on this thread,
  /// one inside the other (``AttemptContext/endingOnAttemptTask(_:)``).
  var attemptTaskDepth = 0
  /// The calls that registered a completion handler whose answer was not known, running on this
  /// thread one inside the other (``CompletionCall``): each one's waiter, and its handler once held
  /// back, to run when the call has returned.
  var completionCalls: [(id: UInt64, held: (() -> Void)?)] = []
  /// While a waiter is resumed out of its attempt's task (``WaiterStore/resumeInOrder(with:on:)``):
  /// the attempts without a task that it let go on on a task of their own
  /// (``AttemptContext/goOnOnATask(for:_:)``), each with its context; `nil` otherwise.
  var goingOn: [(context: AttemptContext, step: @Sendable () -> Void)]?

  /// This thread's state, made on first use and destroyed with the thread.
  @inline(__always) static var current: UnsafeMutablePointer<PerThread> {
    let key = self.key
    if let pointer = pthread_getspecific(key) { return pointer.assumingMemoryBound(to: PerThread.self) }
    return make(key)
  }

  @inline(never) private static func make(_ key: pthread_key_t) -> UnsafeMutablePointer<PerThread> {
    let state = UnsafeMutablePointer<PerThread>.allocate(capacity: 1)
    state.initialize(to: PerThread())
    pthread_setspecific(key, state)
    return state
  }

  /// The thread-specific key, plus one (`0`: not created yet). An atomic is initialized
  /// statically, so reading it is one load; a lazily initialized global is a `swift_once` call.
  private static let keyPlusOne = Atomic<UInt>(0)

  @inline(__always) private static var key: pthread_key_t {
    let stored = keyPlusOne.load(ordering: .acquiring)
    return stored != 0 ? pthread_key_t(stored - 1) : makeKey()
  }

  /// Creates the key; of two threads that race here, the first to store its key wins and the
  /// other deletes its own.
  @inline(never) private static func makeKey() -> pthread_key_t {
    var key = pthread_key_t()
    #if canImport(Darwin)
      pthread_key_create(&key) { PerThread.destroy($0) }
    #else
      pthread_key_create(&key) { pointer in if let pointer { PerThread.destroy(pointer) } }
    #endif
    let (stored, winner) = keyPlusOne.compareExchange(
      expected: 0, desired: UInt(key) + 1, ordering: .acquiringAndReleasing)
    if stored { return key }
    pthread_key_delete(key)
    return pthread_key_t(winner - 1)
  }

  private static func destroy(_ pointer: UnsafeMutableRawPointer) {
    let state = pointer.assumingMemoryBound(to: PerThread.self)
    state.deinitialize(count: 1)
    state.deallocate()
  }
}
