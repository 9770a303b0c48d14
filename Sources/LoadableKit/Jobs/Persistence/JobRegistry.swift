import Foundation

/// The work types an app knows, by kind, so it can restore saved jobs without knowing their types
/// in advance.
///
/// ```swift
/// var registry = JobRegistry()
/// registry.register(DownloadTiles.self)
/// registry.register(SyncGeodatabase.self, options: syncOptions)
///
/// for file in savedJobFiles {
///   let job = try registry.job(fromJSON: Data(contentsOf: file))   // any JobHandle
///   job.start()
/// }
/// ```
public struct JobRegistry: Sendable {
  private struct Entry: Sendable {
    var type: ObjectIdentifier
    var restore: @Sendable (Data) throws -> any JobHandle
  }

  private var entries: [String: Entry] = [:]

  /// Creates an empty registry.
  public init() {}

  /// Creates a registry of `types`, each with default ``JobOptions``.
  public init(_ types: any JobWork.Type...) {
    for type in types { register(type) }
  }

  /// Registers `type` under its ``JobWork/kind``; its jobs are restored with `options`.
  ///
  /// Registering the same type again replaces its options.
  ///
  /// - Precondition: No other type is registered under the same kind. Two types with one kind are
  ///   a programming error: the JSON could not tell them apart.
  public mutating func register<Work: JobWork>(_ type: Work.Type, options: JobOptions = JobOptions()) {
    let id = ObjectIdentifier(type)
    if let existing = entries[Work.kind] {
      precondition(existing.type == id, "JobRegistry: two work types share the kind \"\(Work.kind)\"")
    }
    entries[Work.kind] = Entry(type: id) { data in try Job<Work>.fromJSON(data, options: options) }
  }

  /// The kinds registered.
  public var kinds: Set<String> { Set(entries.keys) }

  /// Restores a job from its JSON form with the type registered for its kind.
  ///
  /// - Parameter data: A job's JSON form, as ``Job/toJSON()`` made it.
  /// - Returns: The restored job, as ``Job/fromJSON(_:)`` restores it.
  /// - Throws: ``JobError`` with ``JobError/Code/unknownKind`` when no type is registered for the
  ///   kind, or ``JobError/Code/truncated``, ``JobError/Code/malformed`` or
  ///   ``JobError/Code/unsupportedSchemaVersion``.
  public func job(fromJSON data: Data) throws -> any JobHandle {
    let kind = try JobJSON.kind(of: data)
    guard let entry = entries[kind] else {
      throw JobError(code: .unknownKind, message: "no work type is registered for the kind \"\(kind)\"")
    }
    return try entry.restore(data)
  }

  /// Reads the kind of a job's JSON form without restoring the job.
  ///
  /// - Throws: ``JobError`` with ``JobError/Code/truncated``, ``JobError/Code/malformed`` or
  ///   ``JobError/Code/unsupportedSchemaVersion``.
  public static func kind(ofJSON data: Data) throws -> String {
    try JobJSON.kind(of: data)
  }
}
