public import LoadableKit
import Synchronization
public import Tracing

/// Turns each attempt of a loadable into a span of swift-distributed-tracing, whose parent is the
/// span of the attempt that asked for it.
///
/// A trace of opening a map then shows portal → items → tables → layers as a tree, each span as
/// long as its attempt, with the waits in it:
///
/// ```swift
/// LoadInstrumentation.processWide = TracingInstrument(tracer: InstrumentationSystem.tracer)
/// ```
///
/// An attempt nobody's attempt asked for starts its span in the caller's
/// `InstrumentationContext.current` (so the loads a request handler makes join the request's
/// trace), or as a new trace. Each span is named by the loadable's `displayName` and carries
/// the attributes `loadable.intent`, `loadable.attempt`, and at its end `loadable.outcome`,
/// `loadable.retries` and `loadable.callers`. A retry adds a `retry` event; a failure records the
/// error and sets the status to error; a cancellation is not an error.
///
/// The instrument keeps the spans of running attempts only: an attempt whose parent already
/// ended (an incidental dependency that outlived its dependent) starts in the caller's context.
public final class TracingInstrument<T: Tracer>: LoadInstrument, Sendable where T: Sendable {
  /// The tracer spans are started on.
  public let tracer: T
  private let open = Mutex<[LoadAttempt.ID: T.Span]>([:])

  /// Creates an instrument that starts spans on `tracer`.
  public init(tracer: T) {
    self.tracer = tracer
  }

  /// How many attempts have a span open (for tests).
  public var openSpanCount: Int { open.withLock { $0.count } }

  public func attemptStarted(_ attempt: LoadAttempt) {
    let parent: T.Span? = attempt.parent.flatMap { id in open.withLock { $0[id] } }
    let context = parent?.context ?? InstrumentationContext.current ?? .topLevel
    let span = tracer.startSpan(attempt.name, context: context, ofKind: .internal)
    span.attributes["loadable.intent"] = attempt.intent.rawValue
    span.attributes["loadable.attempt"] = Int64(truncatingIfNeeded: attempt.id.rawValue)
    open.withLock { $0[attempt.id] = span }
  }

  public func attemptRetrying(_ attempt: LoadAttempt, _ retry: LoadAttempt.Retry) {
    guard let span = open.withLock({ $0[attempt.id] }) else { return }
    span.addEvent(
      SpanEvent(
        name: "retry",
        attributes: [
          "loadable.retry": .int64(Int64(retry.number)),
          "loadable.retry.error": .string(String(describing: retry.error)),
          "loadable.retry.delay_ms": .double(milliseconds(retry.delay)),
        ]))
  }

  public func attemptEnded(_ attempt: LoadAttempt, _ end: LoadAttempt.End) {
    guard let span = open.withLock({ $0.removeValue(forKey: attempt.id) }) else { return }
    span.attributes["loadable.retries"] = Int64(end.retries)
    span.attributes["loadable.callers"] = Int64(end.callers)
    switch end.outcome {
    case .loaded:
      span.attributes["loadable.outcome"] = "loaded"
      span.setStatus(SpanStatus(code: .ok))
    case .failed(let error):
      span.attributes["loadable.outcome"] = "failed"
      span.recordError(error)
      span.setStatus(SpanStatus(code: .error, message: String(describing: error)))
    case .timedOut:
      span.attributes["loadable.outcome"] = "timedOut"
      span.setStatus(SpanStatus(code: .error, message: "timed out"))
    case .cancelled:
      span.attributes["loadable.outcome"] = "cancelled"
    }
    span.end()
  }
}

func milliseconds(_ duration: Duration) -> Double {
  let (seconds, attoseconds) = duration.components
  return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}
