import ExampleServices
import LoadableKit
import LoadableKitTesting

/// What one fling of step 9 cost: the requests the service saw, and when the rows were drawn.
struct FlingOutcome {
  var counts: FlingNetwork.Counts
  /// After the list stopped: until its visible rows were drawn, and until every claimed row was.
  var visibleDrawn: FlingNetwork.Micros
  var allDrawn: FlingNetwork.Micros
  /// The most requests on the link at once.
  var peakInFlight: Int
}

/// A fling over `distance` rows, `rowsPerFrame` rows a frame, one frame every `frame` of
/// simulated time, with `ahead` rows prefetched past the screen; then the list stops, and the
/// link carries what is left.
///
/// `limited: false` is a loader without `maximumConcurrentLoads`, whose prefetched rows are plain
/// (visible) claims: every row claimed
/// sends a request at once. `limited: true` allows 6 loads at once and prefetches with
/// `prefetch(_:)`: visible rows go first, a prefetched row waits, and a row that scrolls past
/// before its turn never sends a request.
func fling(
  limited: Bool, distance: Int = 200, rowsPerFrame: Int = 12, rowsPerScreen: Int = 6, ahead: Int = 12,
  frame: FlingNetwork.Micros = 16_000, transferTime: Duration = .milliseconds(40)
) -> FlingOutcome {
  let network = FlingNetwork(transferTime: transferTime)
  // Everything the loader starts runs on this executor, one job at a time in the order queued,
  // and only when the run says so: settling is running it until nothing is left to run — every
  // load the loader is going to start has reached the link or waits for a slot.
  let executor = ManualTaskExecutor()
  let limit = limited ? 6 : nil
  let loader = ContentLoader<Int, String, Int>(
    idleTimeout: nil, maximumConcurrentLoads: limit, taskExecutor: executor
  ) { row in
    (try await network.thumbnail(row: row), 1)
  }
  var visible: [Int: ContentLoader<Int, String, Int>.Claim] = [:]
  var prefetched: [Int: ContentLoader<Int, String, Int>.Claim] = [:]  // without the limit
  let prefetch = loader.prefetch([Int]())  // with it
  var prefetchedRows: Set<Int> = []
  var peak = 0
  func settle() {
    executor.runInOrder()
    peak = max(peak, network.inFlightCount)
  }

  // One frame: the rows on screen claim first, then the rows ahead are prefetched; rows that
  // left either area end their claims.
  func show(top: Int) {
    let onScreen = Set(top..<top + rowsPerScreen)
    let nearby = Set(top + rowsPerScreen..<top + rowsPerScreen + ahead)
    for row in onScreen.sorted() where visible[row] == nil { visible[row] = loader.begin(row) }
    for row in visible.keys.sorted() where !onScreen.contains(row) { visible.removeValue(forKey: row)?.end() }
    settle()
    if limited {
      prefetch.add(nearby.subtracting(prefetchedRows).sorted())
      prefetch.cancel(prefetchedRows.subtracting(nearby).sorted())
    } else {
      for row in nearby.sorted() where prefetched[row] == nil { prefetched[row] = loader.begin(row) }
      for row in prefetched.keys.sorted() where !nearby.contains(row) { prefetched.removeValue(forKey: row)?.end() }
    }
    prefetchedRows = nearby
    settle()
  }

  let tops = Array(stride(from: 0, to: distance, by: rowsPerFrame)) + [distance]
  for top in tops {
    if top != 0 { network.advance(by: frame, settle: settle) }
    show(top: top)
  }
  let stop = network.now
  network.advance(by: nil, settle: settle)
  let drawn = { (rows: [Int]) in rows.map { max(0, (network.answeredAt($0) ?? .max) - stop) }.max() ?? 0 }
  let outcome = FlingOutcome(
    counts: network.counts, visibleDrawn: drawn(visible.keys.sorted()),
    allDrawn: drawn(visible.keys.sorted() + prefetchedRows.sorted()), peakInFlight: peak)
  for claim in visible.values { claim.end() }
  for claim in prefetched.values { claim.end() }
  prefetch.cancel()
  settle()
  return outcome
}

/// `720 ms`, from simulated microseconds, to the nearest millisecond.
func milliseconds(_ micros: FlingNetwork.Micros) -> String {
  "\((micros + 500) / 1_000) ms"
}
