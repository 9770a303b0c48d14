@testable import LoadableKit
import Testing

/// The one backoff type, seen through both of its vocabularies: a loadable's `RetryPolicy`
/// (`initialDelay`, `maxDelay`, `jitter`) and a job's `JobOptions.Backoff`.
@Suite("Backoff")
struct BackoffTests {
  @Test func aRetryPolicyIsItsBackoffUnderOtherNames() {
    var policy = RetryPolicy(initialDelay: .seconds(2), multiplier: 3, maxDelay: .seconds(20), jitter: 0.5, random: { 0.5 })
    #expect(policy.backoff == Backoff(initial: .seconds(2), multiplier: 3, maximum: .seconds(20), jitter: 0.5))
    policy.initialDelay = .seconds(1)
    policy.multiplier = 4
    policy.maxDelay = .seconds(10)
    policy.jitter = 0.25
    #expect(policy.backoff == Backoff(initial: .seconds(1), multiplier: 4, maximum: .seconds(10), jitter: 0.25))
    // A job given the same backoff waits the same delays, with the same draw of the jitter.
    let job = JobOptions(backoff: policy.backoff)
    let jobDelays = (1...3).map { job.backoff.delay(forAttempt: $0, random: { 0.5 }) }
    #expect(jobDelays == (1...3).map(policy.delay(beforeRetry:)))
    #expect(jobDelays == [.milliseconds(875), .milliseconds(3_500), .milliseconds(8_750)])
  }

  @Test func jitterIsAFractionFromZeroToOne() {
    let all = Backoff(initial: .seconds(10), multiplier: 2, maximum: .seconds(60), jitter: 7)
    #expect(all.jitter == 1)
    #expect(all.delay(forAttempt: 2, random: { 0.25 }) == .seconds(15))
    let none = Backoff(initial: .seconds(10), multiplier: 2, maximum: .seconds(60), jitter: -1)
    #expect(none.jitter == 0)
    #expect(none.delay(forAttempt: 2, random: { Issue.record("no jitter draws no number"); return 0.5 }) == .seconds(20))
    #expect(Backoff.exponential().jitter == 0)
    #expect(RetryPolicy(jitter: 3).jitter == 1)
  }

  /// The delays are the durations the policy names: a `TestClock` advanced by the documented
  /// delay wakes the retry. They were `initial × factor` in `Double` seconds, converted back
  /// (300 ms came back 40 attoseconds longer; found by a second review, helper 37).
  @Test func theDelaysAreTheDurationsTheyName() {
    for ms in [300, 700, 1_100, 2_300] {
      #expect(RetryPolicy(initialDelay: .milliseconds(ms), multiplier: 1, jitter: 0).delay(beforeRetry: 1) == .milliseconds(ms))
      let doubling = Backoff.exponential(initial: .milliseconds(ms), maximum: .seconds(3_600))
      #expect((1...4).map(doubling.delay(forAttempt:)) == [1, 2, 4, 8].map { .milliseconds(ms * $0) })
    }
    #expect(Backoff.exponential(initial: .milliseconds(300), multiplier: 1.5).delay(forAttempt: 2) == .milliseconds(450))
  }

  /// A jitter set after creation (a `var`), or a draw outside `0..<1` from a policy's own
  /// `random`, is taken as the nearest fraction from 0 to 1: a delay is never negative and never
  /// more than the maximum, as `delay(forAttempt:)` promises (helper 37).
  @Test func aJitterOrADrawOutOfRangeKeepsTheDelayWithinItsBounds() {
    var policy = RetryPolicy(initialDelay: .seconds(1), maxDelay: .seconds(1), jitter: 0, random: { 0.75 })
    policy.jitter = -1
    #expect(policy.delay(beforeRetry: 1) == .seconds(1), "no jitter: the delay")
    policy.jitter = 3
    #expect(policy.delay(beforeRetry: 1) == .milliseconds(250), "all of it: a quarter left for a draw of 0.75")
    policy.jitter = .nan
    #expect(policy.delay(beforeRetry: 1) == .seconds(1))
    var backoff = Backoff(initial: .seconds(1), multiplier: 2, maximum: .seconds(1))
    backoff.jitter = 2
    #expect(backoff.delay(forAttempt: 1, random: { 0.75 }) == .milliseconds(250))
    backoff.jitter = 0.5
    #expect(backoff.delay(forAttempt: 1, random: { 7 }) == .milliseconds(500), "a draw past 1 counts as 1")
    #expect(backoff.delay(forAttempt: 1, random: { -7 }) == .seconds(1), "below 0 as 0")
  }

  /// `Duration * Double` goes through a `Double` of the attoseconds: exact for 300 ms, not for
  /// 1.1 s (`.seconds(1.1)` is 1.100000000000000096 s, 57 significant bits), where even retry 1
  /// (factor 1) came back 32 attoseconds longer. An integral factor scales exactly (the review of
  /// 37277eb, helper 38).
  @Test func anIntegralFactorScalesAnyDelayExactly() {
    let policy = RetryPolicy(initialDelay: .seconds(1.1), multiplier: 2, maxDelay: .seconds(60), jitter: 0)
    #expect(policy.delay(beforeRetry: 1) == .seconds(1.1), "\((policy.delay(beforeRetry: 1) - .seconds(1.1)).components)")
    #expect(policy.delay(beforeRetry: 2) == .seconds(1.1) * 2)
    let backoff = Backoff.exponential(initial: .seconds(10) + .nanoseconds(1), maximum: .seconds(3_600))
    #expect(backoff.delay(forAttempt: 1) == .seconds(10) + .nanoseconds(1))
  }
}
