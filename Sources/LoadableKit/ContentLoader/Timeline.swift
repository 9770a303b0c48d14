#if canImport(Glibc)
  import Glibc
#endif

/// An injected `Clock` reduced to what ``ContentLoader`` needs, with its instants expressed as the
/// time elapsed since the loader was created.
///
/// `any Clock<Duration>` cannot be stored next to its own `Instant` in a non-generic place, so the
/// clock is opened once, here, and its instants are turned into plain `Duration` offsets that the
/// state machine can compare and store.
@usableFromInline
struct Timeline: Sendable {
  /// The time elapsed since the loader was created.
  @usableFromInline let now: @Sendable () -> Duration
  /// Sleeps until the given offset; throws `CancellationError` when the task is cancelled.
  let sleepUntil: @Sendable (Duration) async throws -> Void

  init(_ clock: some Clock<Duration>) {
    #if canImport(Glibc)
      if let clock = clock as? ContinuousClock {
        self.init(continuous: clock)
        return
      }
    #endif
    self.init(opened: clock)
  }

  private init(opened clock: some Clock<Duration>) {
    let start = clock.now
    now = { start.duration(to: clock.now) }
    sleepUntil = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
  }

  #if canImport(Glibc)
    /// The default clock, whose instants a key's claim and release read (an idle entry's time, an
    /// expiry threshold): `ContinuousClock` reads `CLOCK_BOOTTIME` on Linux, read here directly,
    /// not through the witnesses of a clock opened from an existential (~200 instructions a read).
    ///
    /// The origin is read before the clock's instant that sleeps count from, so an offset read
    /// after a sleep until `offset` ends is never less than `offset`.
    private init(continuous clock: ContinuousClock) {
      let origin = Self.bootTime()
      let start = clock.now
      now = { .nanoseconds(Self.bootTime() &- origin) }
      sleepUntil = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    private static func bootTime() -> Int64 {
      var time = timespec()
      clock_gettime(CLOCK_BOOTTIME, &time)
      return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
  #endif
}
