#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LoadableKit

/// A job's progress for a person: on a terminal, one bar redrawn in place (a carriage return
/// takes the cursor back to the start of its line); otherwise — a pipe, a log, a test — a plain
/// line each time the progress passes a quarter, so the output stays readable.
///
/// ```
///     [██████████░░░░░░░░░░]  51%  21 of 41 tiles
/// ```
struct ProgressBar {
  /// Whether the bar is redrawn in place: standard output is a terminal.
  let inPlace = isatty(STDOUT_FILENO) == 1
  let total: Int
  let unit: String
  /// The quarters passed (0–4), for the plain lines.
  private var quarters: Int
  /// The fraction drawn last, for redrawing the bar under a line printed above it.
  private var fraction: Double
  /// Whether the bar is on the terminal's current line.
  private var isDrawn = false

  /// A bar for `total` units that starts at `fraction` (a resumed job does not start at 0).
  init(total: Int, unit: String, fraction: Double = 0) {
    self.total = total
    self.unit = unit
    self.fraction = fraction
    quarters = Self.quarters(in: fraction)
  }

  /// Shows the progress: redraws the bar, or prints a line if it passed a quarter.
  mutating func update(_ fraction: Double) {
    self.fraction = fraction
    if inPlace {
      write("\r\u{1B}[2K" + render(fraction))
      isDrawn = true
    } else if Self.quarters(in: fraction) > quarters {
      quarters = Self.quarters(in: fraction)
      print(render(fraction))
    }
  }

  /// Prints `line` above the bar.
  mutating func printLine(_ line: String) {
    if isDrawn {
      write("\r\u{1B}[2K" + line + "\n" + render(fraction))
    } else {
      print(line)
    }
  }

  /// Ends the bar's line, so that what comes next starts on a line of its own.
  mutating func end() {
    if isDrawn { write("\n") }
    isDrawn = false
  }

  /// `    [██████████░░░░░░░░░░]  51%  21 of 41 tiles`
  func render(_ fraction: Double) -> String {
    let clamped = min(max(fraction, 0), 1)
    let cells = Int(clamped * 20)
    let percent = String(Int(clamped * 100))
    let count = Int((clamped * Double(total)).rounded())
    return "    [" + String(repeating: "█", count: cells) + String(repeating: "░", count: 20 - cells) + "] "
      + String(repeating: " ", count: 3 - percent.count) + percent + "%  \(count) of \(total) \(unit)"
  }

  private static func quarters(in fraction: Double) -> Int {
    Int(min(max(fraction, 0), 1) * 4)
  }

  private func write(_ text: String) {
    print(text, terminator: "")
    fflush(nil)  // no newline, so the terminal's line buffering would hold it back
  }
}

/// Starts (or resumes) `job` and shows it run: its status changes and messages as lines, its
/// progress as a ``ProgressBar``. Returns when the job has finished, or as soon as `stop` says so
/// for its progress — the job then goes on running, for the caller to pause or cancel it.
func startAndFollow<Work: JobWork>(
  _ job: Job<Work>, total: Int, unit: String, until stop: (Double) -> Bool = { _ in false }
) async {
  let events = job.events  // subscribed before start(): nothing is missed
  job.start()
  var bar = ProgressBar(total: total, unit: unit, fraction: job.fractionCompleted)
  defer { bar.end() }
  for await event in events {
    switch event {
    case .snapshot:
      break
    case .status(let status):
      bar.printLine(line("status", "\(status)"))
      if status.isFinished { return }
    case .progress(let fraction):
      bar.update(fraction)
      if stop(fraction) { return }
    case .message(let message):
      bar.printLine(line("\(message.severity)", message.text + (message.source.map { "  (\($0))" } ?? "")))
    }
  }
}

/// `    warning  Retry 1 in 0.005 seconds …`: a label in a column of its own, then the text.
func line(_ label: String, _ text: String) -> String {
  "    " + label + String(repeating: " ", count: max(1, 9 - label.count)) + text
}
