import Foundation
import Observation
@testable import LoadableKit
import LoadableKitTesting
import Testing

/// Progress steps reach every subscriber once, however subscribers and readers arrive while the
/// job reports (the fast path publishes a step only once somebody may listen).
@Suite("Jobs: progress and its audience", .timeLimit(.minutes(1)))
struct JobsProgressAudienceTests {
  /// The audience was noted by a *reader* of `fractionCompleted` (not an observer): the subscriber
  /// that comes next has 0.5 in its snapshot, and the next status change must not repeat 0.5 as a
  /// progress event. (Before the fix, only the very first listener was spared the repeat.)
  @Test func aSubscriberAfterAReaderIsNotToldTheProgressTwice() async throws {
    let (job, release) = await startJobHalfDoneWithNobodyListening()
    #expect(job.fractionCompleted == 0.5)  // e.g. a log line, a JobHandle read
    let events = job.events
    let seen = await pauseAndCancel(job, releasing: release, reading: events)
    #expect(seen == ["snapshot 0.5", "paused", "canceling", "failed"])
  }

  /// Two first subscriptions race a progress report: subscriber A notes the audience, subscriber
  /// B's whole `addObserver` runs before A's, a report crosses a step (0.6) and sees the audience,
  /// then A is added before the report publishes. B, whose snapshot said 0.5, must hear of 0.6.
  /// Before the fix, adding the first listener marked the progress as published, and B never heard
  /// of 0.6, not even at the next status change. The interleaving is replayed step by step.
  @Test func aConcurrentFirstListenerDoesNotHideAStepFromTheOtherSubscriber() async throws {
    let (job, release) = await startJobHalfDoneWithNobodyListening()

    // Subscriber A, first half: `signals.noteAudience()` (in `Job.addObserver`).
    job.signals.noteAudience()
    // Subscriber B, whole `addObserver`: not first; snapshot 0.5.
    let eventsB = job.events
    // A report crosses a step and finds an audience ...
    #expect(job.signals.raiseProgress(to: 0.6))
    #expect(job.signals.needsPublishing())
    // ... A's second half runs before the report's `host.publishProgress()`.
    let idA = nextUniqueID()
    if job.withState({ $0.addObserver(idA, { _ in }) }) == true { job.drainObservers() }
    job.publishProgress()  // the report's publish

    let seen = await pauseAndCancel(job, releasing: release, reading: eventsB)
    #expect(seen.contains("progress 0.6"), "B was never told of the step to 0.6: \(seen)")
    #expect(job.fractionCompleted == 0.6)
  }

  /// The same race, for a `withObservationTracking` reader of `fractionCompleted` that read 0.5:
  /// it must be told that the progress changed to 0.6.
  @Test func aConcurrentFirstListenerDoesNotHideAStepFromAnObservationTracker() async throws {
    let (job, release) = await startJobHalfDoneWithNobodyListening()

    job.signals.noteAudience()
    let changed = Recorder<String>()
    let read = withObservationTracking { job.fractionCompleted } onChange: { changed.append("changed") }
    #expect(read == 0.5)
    #expect(job.signals.raiseProgress(to: 0.6))
    #expect(job.signals.needsPublishing())
    let idA = nextUniqueID()
    if job.withState({ $0.addObserver(idA, { _ in }) }) == true { job.drainObservers() }
    job.publishProgress()
    #expect(changed.values == ["changed"], "the tracker that read 0.5 was not told the progress changed to 0.6")
    release.open()
    await job.cancel()
  }
}

/// Starts a job that reports half its work while nobody listens (so the step is not published)
/// and then waits at its hook until `release` opens, before its pause point.
func startJobHalfDoneWithNobodyListening() async -> (Job<ScriptedWork>, release: JobLatch) {
  let work = ScriptedWork(runs: [[.report(completed: 1, total: 2), .hook, .pausePoint]])
  let job = Job(work)
  let release = await start(job, hookID: work.id, heldAt: 1)
  return (job, release)
}

/// An event as the progress tests compare it (messages left out).
func describeProgressEvent(_ event: JobEvent) -> String? {
  switch event {
  case .snapshot(let snapshot): "snapshot \(snapshot.fractionCompleted)"
  case .progress(let fraction): "progress \(fraction)"
  case .status(let status): "\(status)"
  case .message: nil
  }
}

/// Pauses `job`, opens `release` (its hook), waits until its work is parked, cancels it, and
/// returns what `events` told until the end, described by ``describeProgressEvent(_:)``.
func pauseAndCancel(
  _ job: Job<ScriptedWork>, releasing release: JobLatch, reading events: AsyncStream<JobEvent>
) async -> [String] {
  job.pause()
  release.open()
  await job.waitUntilParked()
  await job.cancel()
  var seen: [String] = []
  for await event in events { if let line = describeProgressEvent(event) { seen.append(line) } }
  return seen
}
