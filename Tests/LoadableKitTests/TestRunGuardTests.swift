import Foundation
import Testing

#if os(Linux)
/// The run itself: a test process outlives no `swift test` that started it (issue 25).
@Suite("The test run", .timeLimit(.minutes(1)))
struct TestRunGuardTests {
  /// Set in the environment of the probe below, to a path: the test then creates that file and
  /// holds its process until killed.
  static let probeVariable = "LOADABLEKIT_ORPHAN_PROBE"

  /// Not a check of its own: the process the test below starts runs only this, which says it
  /// runs and then holds the process (as a test stuck on a lost waiter would) until something
  /// ends it.
  @Test(.enabled(if: ProcessInfo.processInfo.environment[probeVariable] != nil))
  func orphanProbe() {
    let marker = ProcessInfo.processInfo.environment[Self.probeVariable]!
    _ = FileManager.default.createFile(atPath: marker, contents: Data())
    while true { pause() }
  }

  /// A shell starts this test binary in the background to run the probe above, and exits: the
  /// probe's parent is gone, as when a CI step's time limit kills `swift test`. The guard ends
  /// the probe's process within a fraction of a second.
  @Test func aTestProcessWhoseRunnerIsGoneEnds() async throws {
    #expect(testProcessGuardIsRunning)
    let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    let marker = FileManager.default.temporaryDirectory.appendingPathComponent("orphan-probe-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: marker) }
    // The shell exits once the probe runs (bounded: 60 s; a binary built with ThreadSanitizer
    // starts slowly on a busy machine), leaving it without its parent. Run with `system`, which
    // waits for the shell alone (Foundation's `Process` also waited for the probe it left behind).
    defer { try? FileManager.default.removeItem(atPath: marker + ".pid") }
    let script = """
      \(Self.probeVariable)='\(marker)' '\(binary)' --testing-library swift-testing --filter orphanProbe \
        </dev/null >/dev/null 2>&1 &
      echo $! > '\(marker).pid'
      for i in $(seq 1200); do [ -e '\(marker)' ] && exit 0; sleep 0.05; done
      """
    // On a thread of its own: `system` blocks, and the test's cooperative threads are few.
    let status = await withCheckedContinuation { continuation in
      DispatchQueue.global().async { continuation.resume(returning: system(script)) }
    }
    #expect(status == 0)
    let text = try String(contentsOfFile: marker + ".pid", encoding: .utf8)
    let pid = try #require(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    // The probe holds its process forever; only the guard ends it. Bounded: 20 s.
    var alive = true
    for _ in 0..<400 where alive {
      alive = Self.isRunning(pid)
      if alive { try await Task.sleep(for: .milliseconds(50)) }
    }
    if alive { kill(pid, SIGKILL) }
    #expect(!alive, "the orphaned test process \(pid) was still running 20 s after its runner was gone")
  }

  /// Whether `pid` names a process that has not exited (a zombie that nobody reaped has).
  static func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
  }
}
#endif
