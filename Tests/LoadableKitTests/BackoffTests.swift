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
}
