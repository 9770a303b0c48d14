import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The default ``JobStore``: a directory with one JSON file per job, each write atomic, held by
/// one ``JobManager`` at a time.
///
/// Job `id` is the file `id.json`. A save writes a temporary file in the same directory, flushes
/// it to disk (`fsync`), renames it over `id.json` and flushes the directory, so a crash at any
/// instant leaves the previous file or the new one, never a torn one; temporary files a crash left
/// behind are deleted when the store opens. Records that cannot be restored are moved to the
/// `Set aside` subdirectory, never deleted.
///
/// The store takes an advisory lock (`flock`) on the file `.lock` in the directory for as long
/// as it lives, so a second store on the same directory, in this process or another, fails with
/// ``JobError/Code/storeLocked`` instead of overwriting the first one's files. In this process the
/// second store fails at once. A lock held elsewhere is asked for again for up to 100 ms before
/// the store fails: a child process that this process forks (to run a tool) holds a copy of the
/// lock's descriptor from its fork to its `exec`, and a store opened just after the first one was
/// released must not fail for that moment.
public final class DirectoryJobStore: JobStore, @unchecked Sendable {
  /// The directory that holds the jobs' files.
  public let directory: URL
  /// The subdirectory that records set aside are moved to.
  public var setAsideDirectory: URL { directory.appendingPathComponent("Set aside", isDirectory: true) }
  /// The descriptor of the lock file; immutable, closed in `deinit`.
  private let lockDescriptor: Int32

  /// The directories (standardized paths) that a store of this process holds.
  private static let heldHere = Mutex<Set<String>>([])
  private static let heldHereOwner = LockOwner()
  private final class LockOwner: Sendable {}

  private static func withHeld<R: Sendable>(_ body: (inout Set<String>) -> R) -> R {
    heldHere.withLock(owner: heldHereOwner) { body(&$0) }
  }

  /// Opens (and creates, if needed) the store in `directory`.
  ///
  /// - Parameter directory: A directory URL; it is created with its parents when missing.
  /// - Throws: ``JobError`` with ``JobError/Code/storeLocked`` when another store holds the
  ///   directory, or ``JobError/Code/storeFailed`` when it cannot be created or locked.
  public init(directory: URL) throws {
    self.directory = directory.standardizedFileURL
    do {
      try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    } catch {
      throw JobError(code: .storeFailed, message: "cannot create \(directory.path): \(error)", underlyingError: error)
    }
    let path = self.directory.path
    let locked = JobError(code: .storeLocked, message: "another job manager holds \(path)")
    guard Self.withHeld({ $0.insert(path).inserted }) else { throw locked }
    do {
      lockDescriptor = try Self.lock(self.directory.appendingPathComponent(".lock").path, locked: locked)
    } catch {
      _ = Self.withHeld { $0.remove(path) }
      throw error
    }
  }

  deinit {
    // Out of the registry first: a store opened here meanwhile then waits for the lock's release
    // instead of failing at once.
    _ = Self.withHeld { $0.remove(directory.path) }
    close(lockDescriptor)  // releases the lock
  }

  /// Opens and locks `lockPath`; returns its descriptor.
  private static func lock(_ lockPath: String, locked: JobError) throws -> Int32 {
    let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else {
      throw JobError(code: .storeFailed, message: "cannot open \(lockPath): \(Self.lastError())")
    }
    // Held elsewhere: another process, or a child of this one between its fork and its exec.
    // Asked again every 5 ms, 20 times at most.
    var attempts = 0
    while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
      let reason = errno
      attempts += 1
      guard reason == EWOULDBLOCK || reason == EINTR, attempts <= 20 else {
        close(descriptor)
        if reason == EWOULDBLOCK { throw locked }
        throw JobError(code: .storeFailed, message: "cannot lock \(lockPath): \(String(cString: strerror(reason)))")
      }
      usleep(5_000)
    }
    return descriptor
  }

  /// The file of job `id`.
  public func fileURL(for id: String) -> URL {
    directory.appendingPathComponent(id + ".json")
  }

  public func loadAll() throws -> [JobStoreRecord] {
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
    } catch {
      throw JobError(code: .storeFailed, message: "cannot list \(directory.path): \(error)", underlyingError: error)
    }
    var records: [JobStoreRecord] = []
    for name in names.sorted() {
      if name.hasPrefix(".tmp-") {
        unlink(directory.appendingPathComponent(name).path)  // a save a crash cut short
        continue
      }
      guard name.hasSuffix(".json"), !name.hasPrefix(".") else { continue }
      let id = String(name.dropLast(".json".count))
      do {
        records.append(JobStoreRecord(id: id, data: .success(try Data(contentsOf: fileURL(for: id)))))
      } catch {
        records.append(
          JobStoreRecord(
            id: id,
            data: .failure(JobError(code: .storeFailed, message: "cannot read \(name): \(error)", underlyingError: error))))
      }
    }
    return records
  }

  public func save(_ data: Data, id: String) throws {
    try Self.checkID(id)
    let temporary = directory.appendingPathComponent(".tmp-\(id)-\(UUID().uuidString)").path
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { throw failure("cannot create a temporary file for \(id)") }
    var written = 0
    let ok = data.withUnsafeBytes { buffer -> Bool in
      while written < buffer.count {
        let result = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
        if result < 0 {
          if errno == EINTR { continue }
          return false
        }
        written += result
      }
      return true
    }
    guard ok, fsync(descriptor) == 0 else {
      let error = failure("cannot write the file of \(id)")
      close(descriptor)
      unlink(temporary)
      throw error
    }
    close(descriptor)
    guard rename(temporary, fileURL(for: id).path) == 0 else {
      let error = failure("cannot rename the file of \(id)")
      unlink(temporary)
      throw error
    }
    syncDirectory()
  }

  public func remove(id: String) throws {
    try Self.checkID(id)
    guard unlink(fileURL(for: id).path) == 0 || errno == ENOENT else { throw failure("cannot remove the file of \(id)") }
    syncDirectory()
  }

  public func setAside(id: String) throws {
    try Self.checkID(id)
    do {
      try FileManager.default.createDirectory(at: setAsideDirectory, withIntermediateDirectories: true)
    } catch {
      throw JobError(code: .storeFailed, message: "cannot create \(setAsideDirectory.path): \(error)", underlyingError: error)
    }
    var target = setAsideDirectory.appendingPathComponent(id + ".json")
    if FileManager.default.fileExists(atPath: target.path) {
      target = setAsideDirectory.appendingPathComponent("\(id)-\(UUID().uuidString).json")
    }
    guard rename(fileURL(for: id).path, target.path) == 0 else { throw failure("cannot set the file of \(id) aside") }
    syncDirectory()
  }

  /// Identifiers name files: no path separators, nothing hidden, not empty.
  static func checkID(_ id: String) throws {
    guard !id.isEmpty, !id.hasPrefix("."), !id.contains("/"), !id.contains("\0") else {
      throw JobError(code: .storeFailed, message: "\"\(id)\" cannot name a job's file")
    }
  }

  private func syncDirectory() {
    let descriptor = open(directory.path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    fsync(descriptor)
    close(descriptor)
  }

  private func failure(_ what: String) -> JobError {
    JobError(code: .storeFailed, message: "\(what) in \(directory.path): \(Self.lastError())")
  }

  private static func lastError() -> String { String(cString: strerror(errno)) }
}
