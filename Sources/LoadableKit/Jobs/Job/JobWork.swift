/// The long-running operation that a ``Job`` runs, described by Codable parameters.
///
/// A `JobWork` value is the job's *parameters*: it is encoded into the job's JSON form, so a job
/// can be restored after the app stopped. ``run(in:)`` does the work in units; between units it
/// calls ``JobContext/pausePoint()`` and saves a ``Checkpoint`` from which a later run resumes.
///
/// ```swift
/// struct DownloadTiles: JobWork {
///   static let kind = "com.example.download-tiles"
///   var tiles: [TileID]
///
///   func run(in context: JobContext<Int>) async throws -> Int {
///     var next = context.checkpoint ?? 0          // resume where the last run stopped
///     while next < tiles.count {
///       try await context.pausePoint()            // parks while paused, throws once cancelled
///       try await download(tiles[next])
///       next += 1
///       context.saveCheckpoint(next)
///       context.reportProgress(completed: next, total: tiles.count)
///     }
///     context.post("Downloaded \(tiles.count) tiles")
///     return tiles.count
///   }
/// }
/// ```
///
/// A unit of work may run twice: when the job is serialized while a unit is in progress, or when a
/// transient error interrupts a unit, the next run starts again from the last checkpoint. Make each
/// unit idempotent, or save a checkpoint at every point where the work may be resumed.
public protocol JobWork: Codable, Sendable {
  /// The result of a successful run. It is not persisted.
  associatedtype Output: Sendable
  /// The state from which a later run resumes. It is persisted in the job's JSON form.
  associatedtype Checkpoint: Codable & Sendable

  /// A stable name for this kind of work, stored in the job's JSON form.
  ///
  /// ``Job/fromJSON(_:)`` rejects JSON of another kind, and ``JobRegistry`` uses the kind to find
  /// the type that decodes a job. Never change it once jobs of this kind may have been saved; a
  /// reverse-DNS name avoids clashes.
  static var kind: String { get }

  /// Does the work, starting from `context.checkpoint` when there is one.
  ///
  /// The job calls it on a task of its own, once per run: after ``Job/start()``, and again from the
  /// last checkpoint after an error that the job's ``JobOptions/isTransient`` calls transient.
  /// The task is cancelled by ``Job/cancel()``, so cooperative work stops early.
  ///
  /// - Parameter context: Where the work reads its checkpoint and reports what it does. It is
  ///   valid only while this call runs.
  /// - Returns: The output of the job.
  /// - Throws: Any error; the job then retries it (when it is transient) or fails with it.
  func run(in context: JobContext<Checkpoint>) async throws -> Output
}
