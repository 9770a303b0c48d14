import ExampleServices

/// `rows 6–11`, for cells in row order.
func rows(_ cells: [Cell]) -> String {
  guard let first = cells.first?.row, let last = cells.last?.row else { return "no rows" }
  return first == last ? "row \(first)" : "rows \(first)–\(last)"
}

/// A table of cells: each row's item, the frames its cell drew, and a note.
///
/// ```
///     0  Redlands Topographic  r4 loading → r5 loaded
///     3  Fire Hydrants         — loading → r2 loaded   nothing cached
/// ```
func printCells(_ cells: [Cell], note: (Cell) -> String = origin) {
  printColumns(cells.map { ["\($0.row)", $0.item.title, $0.history(), note($0)] })
}

/// Where the cell's thumbnail came from, as its frames tell.
func origin(_ cell: Cell) -> String {
  let frames = cell.frames
  guard let first = frames.first, let last = frames.last else { return "" }
  if first.status == .loaded { return "in memory: no request" }
  if first.value == nil { return "nothing cached" }
  if last.status == .loaded && last.version == first.version { return "the cached one is current: kept" }
  return ""
}

extension ThumbnailList {
  /// Prints what happened since `before`: the loader's events, the service's requests, and the
  /// loader's entries now.
  ///
  /// ```
  ///     events   12 loads started (9 with a prior value), 6 loaded, 6 cancelled
  ///     service  12 requests, 6 answered, 6 cancelled before an answer
  ///     entries  18: 6 claimed, 12 idle
  /// ```
  func printChanges(since before: Totals) {
    let now = totals
    let (events, earlier) = (now.events, before.events)
    let (requests, earlierRequests) = (now.service, before.service)
    func part(_ count: Int, _ what: String, _ plural: String? = nil) -> String? {
      count == 0 ? nil : "\(count) \(count == 1 ? what : plural ?? what)"
    }
    let withPrior = events.loadingWithPriorValue - earlier.loadingWithPriorValue
    let loader = [
      part(events.started - earlier.started, "load started", "loads started").map {
        withPrior == 0 ? $0 : $0 + " (\(withPrior) with a prior value)"
      },
      part(events.loaded - earlier.loaded, "loaded"),
      part(events.failed - earlier.failed, "failed"),
      part(events.cancelled - earlier.cancelled, "cancelled"),
      part(events.evicted - earlier.evicted, "evicted"),
    ].compactMap { $0 }
    let server = [
      part(requests.requests - earlierRequests.requests, "request", "requests"),
      part(requests.answered - earlierRequests.answered, "answered"),
      part(requests.failed - earlierRequests.failed, "failed"),
      part(requests.cancelled - earlierRequests.cancelled, "cancelled before an answer"),
    ].compactMap { $0 }
    printColumns([
      ["events", loader.isEmpty ? "none" : loader.joined(separator: ", ")],
      ["service", server.isEmpty ? "no requests" : server.joined(separator: ", ")],
      ["entries", "\(now.entries): \(now.claimed) claimed, \(now.entries - now.claimed) idle"],
    ])
  }
}
