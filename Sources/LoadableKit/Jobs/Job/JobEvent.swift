/// Something that happened to a ``Job``, as delivered by ``Job/events``.
///
/// Every subscription starts with a ``snapshot(_:)`` of the job at that moment, so a late
/// subscriber knows the whole state without a race; then it gets every change in the order it
/// happened. The stream ends after the terminal ``status(_:)`` (``JobStatus/succeeded`` or
/// ``JobStatus/failed``).
///
/// Progress events are coalesced: the job sends one each time ``Job/fractionCompleted`` crosses a
/// step of 1/1000 (and before every status change), however often the work reports progress.
public enum JobEvent: Sendable {
  /// The job's state when the subscription began. Always the first event, and only once.
  case snapshot(JobSnapshot)
  /// The status changed.
  case status(JobStatus)
  /// The fraction completed grew to this value.
  case progress(Double)
  /// A message was posted.
  case message(JobMessage)
}
