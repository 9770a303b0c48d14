@testable import LoadableKit
import Testing

/// A `ContentLoader`'s clock, reduced to offsets since the loader was made (`Timeline`). The
/// default clock, `ContinuousClock`, is read directly on Linux (`CLOCK_BOOTTIME`, what the runtime
/// reads for it): its offsets must be the clock's own durations. Every check is an ordering of
/// reads of the one clock, none a bound on how long anything took.
@Suite("ContentLoader's timeline", .timeLimit(.minutes(1)))
struct TimelineTests {
  /// `ContinuousClock` under another name: its timeline takes the general path, through the
  /// clock's witnesses.
  struct Forwarding: Clock {
    let clock = ContinuousClock()
    var now: ContinuousClock.Instant { clock.now }
    var minimumResolution: Duration { clock.minimumResolution }
    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
      try await clock.sleep(until: deadline, tolerance: tolerance)
    }
  }

  /// Made from an existential clock, as the loader makes it.
  static func timeline(direct: Bool) -> Timeline {
    let clock: any Clock<Duration> = direct ? ContinuousClock() : Forwarding()
    return Timeline(clock)
  }

  @Test(arguments: [true, false])
  func anOffsetIsTheClocksDurationBetweenTheReads(direct: Bool) async throws {
    let clock = ContinuousClock()
    let timeline = Self.timeline(direct: direct)
    let outerStart = clock.now
    let first = timeline.now()
    let innerStart = clock.now
    try await clock.sleep(for: .milliseconds(20))
    let innerEnd = clock.now
    let second = timeline.now()
    let outerEnd = clock.now
    #expect(first >= .zero)
    // The two offsets were read between the inner and the outer pairs of the clock's reads.
    #expect(second - first >= innerStart.duration(to: innerEnd))
    #expect(second - first <= outerStart.duration(to: outerEnd))
  }

  @Test(arguments: [true, false])
  func aSleepUntilAnOffsetEndsAtOrAfterIt(direct: Bool) async throws {
    let timeline = Self.timeline(direct: direct)
    for _ in 0..<5 {
      let deadline = timeline.now() + .milliseconds(5)
      try await timeline.sleepUntil(deadline)
      // A sweeper woken at its deadline finds the entries due then expired.
      #expect(timeline.now() >= deadline)
    }
  }
}
