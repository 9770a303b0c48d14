/// The delays between retries, for both retry models: a loadable's ``RetryPolicy`` and a job's
/// transient-error retries (``JobOptions/backoff``), and a server job's polls.
///
/// The delay before retry *n* (1 for the first) is `min(initial × multiplierⁿ⁻¹, maximum)`,
/// reduced by up to ``jitter`` of itself at random so that many clients do not retry in step.
///
/// ```swift
/// Backoff.exponential(initial: .seconds(1), maximum: .seconds(60))  // 1 s, 2 s, 4 s, … 60 s
/// Backoff.constant(.seconds(5))                                       // 5 s, 5 s, 5 s, …
/// ```
public struct Backoff: Sendable, Hashable {
  /// The delay before the first retry.
  public var initial: Duration
  /// The factor each later delay grows by.
  public var multiplier: Double
  /// The longest delay.
  public var maximum: Duration
  /// The fraction of each delay, from 0 to 1, that is randomly taken off; 0 for none.
  public var jitter: Double

  /// Creates a backoff whose delays are `initial`, `initial × multiplier`,
  /// `initial × multiplier²`, …, never more than `maximum`. Negative durations count as zero.
  ///
  /// - Parameters:
  ///   - initial: The delay before the first retry.
  ///   - multiplier: The factor each later delay grows by.
  ///   - maximum: The longest delay.
  ///   - jitter: The fraction of each delay, from 0 to 1, that is randomly taken off; none by
  ///     default.
  public init(initial: Duration, multiplier: Double, maximum: Duration, jitter: Double = 0) {
    self.initial = initial
    self.multiplier = multiplier
    self.maximum = maximum
    self.jitter = Self.fraction(jitter)
  }

  /// Delays that double from `initial` up to `maximum`: by default 1 s, 2 s, 4 s, … 60 s.
  public static func exponential(
    initial: Duration = .seconds(1), multiplier: Double = 2, maximum: Duration = .seconds(60)
  ) -> Backoff {
    Backoff(initial: initial, multiplier: multiplier, maximum: maximum)
  }

  /// The same delay before every retry. A zero delay retries at once.
  public static func constant(_ delay: Duration) -> Backoff {
    Backoff(initial: delay, multiplier: 1, maximum: delay)
  }

  /// The delay before retry number `attempt` (the first retry is 1).
  ///
  /// Never negative and never more than ``maximum``; any `attempt` and `multiplier` are safe.
  /// With ``jitter``, the delay is reduced at random by up to that fraction.
  public func delay(forAttempt attempt: Int) -> Duration {
    delay(forAttempt: attempt, random: { Double.random(in: 0..<1) })
  }

  /// The delay before retry `attempt`, with the jitter drawn from `random` (a number in `0..<1`),
  /// which is called only when there is jitter.
  func delay(forAttempt attempt: Int, random: () -> Double) -> Duration {
    let delay = undisturbedDelay(forAttempt: attempt)
    // `jitter` is a `var`, and a policy's `random` the app's: each is taken as a fraction.
    let jitter = Self.fraction(jitter)
    return jitter == 0 ? delay : delay * (1 - jitter * Self.fraction(random()))
  }

  /// `value` clamped to 0…1 (NaN: 0).
  private static func fraction(_ value: Double) -> Double {
    value > 0 ? min(value, 1) : 0
  }

  /// The delay before retry `attempt` after an error that asked for `retryAfter` (a
  /// `Retry-After`), or `nil` when that is longer than ``maximum``: the longer of the delay asked
  /// for (a negative one counts as zero) and the backoff's.
  func delay(forAttempt attempt: Int, retryAfter asked: Duration?, random: () -> Double) -> Duration? {
    let backoff = delay(forAttempt: attempt, random: random)
    guard let asked else { return backoff }
    // A negative maximum counts as zero, as it does for the backoff's own delays.
    guard asked <= max(maximum, .zero) else { return nil }
    return max(asked, backoff)
  }

  /// `min(initial × multiplierⁿ⁻¹, maximum)`, without jitter.
  private func undisturbedDelay(forAttempt attempt: Int) -> Duration {
    let cap = max(maximum, .zero)
    let first = initial.seconds
    guard first > 0 else { return .zero }
    let factor = multiplier.isNaN ? 1 : Double.pow(max(multiplier, 0), max(attempt, 1) - 1)
    guard (first * factor).isFinite, first * factor < cap.seconds else { return cap }
    // Scaled as a `Duration`, not converted from `Double` seconds, so that a test clock advanced by
    // the delay a policy names wakes it: by an integer when the factor is a whole number (a
    // doubling backoff, a constant one), exactly; otherwise through the `Double` of its
    // attoseconds (`initial * 1.5` is what the app computes too).
    // The cap was compared in `Double` seconds, which may round the product down below it: the
    // exact product is capped again.
    if factor == factor.rounded(.towardZero), factor < 0x1p62 { return min(initial * Int64(factor), cap) }
    return min(initial * factor, cap)
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) * 1e-18
  }
}

extension Double {
  static func pow(_ base: Double, _ exponent: Int) -> Double {
    // Repeated squaring; stays finite or becomes +infinity, never traps.
    var result = 1.0
    var factor = base
    var n = exponent
    while n > 0 {
      if n & 1 == 1 { result *= factor }
      factor *= factor
      n >>= 1
    }
    return result
  }
}
