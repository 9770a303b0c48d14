/// Small helpers for output meant for a person: step headings, aligned columns, readable errors.

/// Prints a step heading: a blank line, then `▸ title`.
public func printStep(_ title: String) {
  print("\n▸ \(title)")
}

/// Prints rows as aligned columns, each line indented by `indent`.
public func printColumns(_ rows: [[String]], indent: String = "    ") {
  let columns = rows.map(\.count).max() ?? 0
  let widths = (0..<columns).map { column in
    rows.map { column < $0.count - 1 ? $0[column].count : 0 }.max() ?? 0
  }
  for row in rows {
    var line = ""
    for (column, cell) in row.enumerated() {
      line += column < row.count - 1 ? cell.padded(to: widths[column] + 2) : cell
    }
    print(indent + line.trimmingTrailingSpaces())
  }
}

/// A short, readable description of an error: `503 Service Unavailable`, `CancellationError`.
public func describe(_ error: (any Error)?) -> String {
  switch error {
  case nil: "no error"
  case is CancellationError: "CancellationError"
  case let error?: "\(error)"
  }
}

/// A map scale as people write it: `1:10,000`, or `none` for 0.
public func formatScale(_ scale: Double) -> String {
  scale == 0 ? "none" : "1:" + grouped(Int(scale.rounded()))
}

/// A duration in milliseconds: `2 ms`.
public func formatDuration(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
}

/// An integer with thousands separators: `52,108`.
public func grouped(_ value: Int) -> String {
  let digits = String(value.magnitude)
  var result = ""
  for (index, digit) in digits.enumerated() {
    if index > 0 && (digits.count - index) % 3 == 0 { result += "," }
    result.append(digit)
  }
  return value < 0 ? "-" + result : result
}

extension String {
  func padded(to width: Int) -> String {
    count >= width ? self : self + String(repeating: " ", count: width - count)
  }

  func trimmingTrailingSpaces() -> String {
    var result = self
    while result.last == " " { result.removeLast() }
    return result
  }
}
