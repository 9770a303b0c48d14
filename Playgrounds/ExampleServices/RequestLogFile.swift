import Foundation

/// A log of requests kept in a file, one line each, so that another process — the app run again
/// with `--resume` — reads what the earlier runs asked. The job service and its HTTP client both
/// keep one, in the same form.
final class RequestLogFile: Sendable {
  let url: URL
  /// One writer at a time within the process; lines are appended, never rewritten.
  private let lock = Locked(())

  init(in directory: URL) {
    url = directory.appendingPathComponent("requests.log")
  }

  /// Appends `line`, creating the file on first use.
  func append(_ line: String) {
    lock.withLock { _ in
      if !FileManager.default.fileExists(atPath: url.path) {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
      }
      guard let file = try? FileHandle(forWritingTo: url) else { return }
      defer { try? file.close() }
      _ = try? file.seekToEnd()
      try? file.write(contentsOf: Data((line + "\n").utf8))
    }
  }

  /// Every line so far, oldest first.
  var lines: [String] {
    let text = lock.withLock { _ in (try? String(contentsOf: url, encoding: .utf8)) ?? "" }
    return text.split(separator: "\n").map(String.init)
  }
}
