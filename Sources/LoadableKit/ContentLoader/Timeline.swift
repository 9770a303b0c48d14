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
    let start = clock.now
    now = { start.duration(to: clock.now) }
    sleepUntil = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
  }
}
