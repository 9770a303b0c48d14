#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ExampleServices
import LoadableKit

typealias ThumbnailLoader = ContentLoader<String, Thumbnail, Int>

/// A list of portal items that shows `rowsPerScreen` rows at a time, as a table view would, with
/// each visible cell showing its item's thumbnail from a ``ThumbnailLoader``.
///
/// A row that scrolls into view gets a ``Cell``, which claims the item's thumbnail; a row that
/// scrolls out of view ends its cell's claim. New rows are claimed before the rows that left are
/// ended, so a row on screen before and after a scroll keeps its claim.
///
/// After each scroll the list can ``settle()``: wait until every visible cell has drawn its
/// final thumbnail, the service has answered (or dropped) every request except the held ones,
/// and the loader's events agree with what the cells drew. It waits for those facts rather than
/// for some time, so that what the run prints is the same on every run.
@MainActor
final class ThumbnailList {
  let items: [CatalogItem]
  let rowsPerScreen: Int
  let loader: ThumbnailLoader
  let service: any ThumbnailServing
  let changes: ChangeSignal
  let events: EventTally

  /// The cells on screen, by row.
  private(set) var visible: [Cell] = []
  /// The cells that scrolled away, in the order they did.
  private(set) var scrolledAway: [Cell] = []
  /// How many entries the loader made: a claim on a key it held no entry for.
  private var entriesMade = 0
  /// How many times a key with a claim was refreshed (each refresh starts a load).
  private var refreshes = 0
  /// The most entries the loader held after a scroll.
  private(set) var peakEntries = 0

  init(items: [CatalogItem], rowsPerScreen: Int, loader: ThumbnailLoader, service: any ThumbnailServing, changes: ChangeSignal) {
    self.items = items
    self.rowsPerScreen = rowsPerScreen
    self.loader = loader
    self.service = service
    self.changes = changes
    events = EventTally(loader.events, changes: changes)
  }

  /// Scrolls so that `firstRow` is the top row. Returns the cells that appeared and those that
  /// scrolled away.
  @discardableResult
  func scroll(to firstRow: Int) -> (appeared: [Cell], disappeared: [Cell]) {
    let rows = firstRow..<min(firstRow + rowsPerScreen, items.count)
    let staying = visible.filter { rows.contains($0.row) }
    let appeared = rows.filter { row in !staying.contains { $0.row == row } }.map { row in
      if loader.snapshot(for: items[row].id) == nil { entriesMade += 1 }
      return Cell(row: row, item: items[row], loader: loader, changes: changes)
    }
    let disappeared = visible.filter { !rows.contains($0.row) }
    for cell in disappeared { cell.claim.end() }
    visible = (staying + appeared).sorted { $0.row < $1.row }
    scrolledAway += disappeared
    peakEntries = max(peakEntries, loader.count)
    return (appeared, disappeared)
  }

  /// The visible cell of `row`.
  func cell(_ row: Int) -> Cell {
    visible.first { $0.row == row }!
  }

  /// Pull-to-refresh on one row: the loader asks for its thumbnail again.
  func refresh(row: Int) {
    loader.refresh(cell(row).item.id)
    refreshes += 1
  }

  /// Values the app wrote to the loader itself (`set(_:version:for:)`): each is a `loaded` event
  /// without a load.
  private(set) var writes = 0

  /// The app already has `thumbnail` (its user just edited it): it writes it to the loader, which
  /// keeps it unless it holds a newer one. Returns whether it was kept.
  @discardableResult
  func write(_ thumbnail: Thumbnail) -> Bool {
    let kept = loader.set(thumbnail, version: thumbnail.revision, for: thumbnail.itemID)
    if kept { writes += 1 }
    return kept
  }

  /// The screen closes: every cell ends its claim.
  func close() {
    for cell in visible { cell.claim.end() }
    scrolledAway += visible
    visible = []
  }

  /// Waits until nothing is left to happen but held requests (see the type's discussion).
  func settle() async {
    await changes.wait { self.pending }
  }

  /// What ``settle()`` still waits for, or `nil`.
  var pending: String? {
    for cell in visible {
      let frames = cell.frames
      guard let last = frames.last else { return "row \(cell.row)'s first frame" }
      if last.status == .loading && !service.isHolding(cell.item.id) { return "row \(cell.row)'s thumbnail" }
      // The cell has drawn what the loader holds now. A change a call makes — a refresh starting
      // a load, a load starting when the one before it ends — is delivered by whichever thread is
      // delivering at that moment, maybe after the call returned: until then the cell's frames
      // say nothing of it, and neither do the counts below.
      let current = cell.claim.snapshot
      if last.status != current.status || last.version != current.version { return "row \(cell.row)'s last frame" }
    }
    let cells = scrolledAway + visible
    // Every claim that found its key without a fresh value started a load — its first frame
    // says `loading` — and so did every refresh of a claimed key. (This holds here because each
    // key is on one row, and without a grace period a key without claims has no load running.)
    // A load cancelled before its attempt ran never asks the service, so the service sees at
    // most that many requests.
    let loadsStarted = cells.count(where: { $0.frames.first?.status == .loading }) + refreshes
    let log = service.log
    // Over HTTP the log is the server's, and a copy: wait until it has every answer this process
    // received, and until the server has seen the client go away for every held request whose
    // load was cancelled (in-process, both are so at once).
    if !service.logIsCurrent { return "the service's log, to catch up with the answers received" }
    let loadingItems = Set(visible.lazy.filter { $0.frames.last?.status == .loading }.map(\.item.id))
    if let held = log.heldItemIDs.first(where: { !loadingItems.contains($0) }) {
      return "the service: a held request for \(held), whose load ended, to end"
    }
    let service = log.counts
    if service.requests > loadsStarted {
      return "the service: \(service.requests) requests of the \(loadsStarted) loads started"
    }
    if service.unfinished != service.held {
      return "the service: \(service.unfinished - service.held) requests in flight"
    }
    // Each time a cell went to `loading` the loader said so in an event; each such load ended
    // in one event, except those still running (held). A value the app wrote is one more
    // `loaded` event, without a load.
    let events = events.counts
    let startsDrawn = cells.map(\.loadsShown).reduce(0, +)
    let running = visible.count(where: { $0.frames.last?.status == .loading })
    if events.started != startsDrawn || events.ended != startsDrawn - running + writes {
      return "the loader's events: \(events.started) loads started and \(events.ended) ended, "
        + "where the cells show \(startsDrawn) and \(startsDrawn - running)"
    }
    if events.evicted != entriesMade - loader.count {
      return "the loader's events: \(events.evicted) evictions of \(entriesMade - loader.count)"
    }
    return nil
  }

  /// The totals so far, to print the difference a step made.
  var totals: Totals {
    Totals(events: events.counts, service: service.counts, entries: loader.count, claimed: visible.count)
  }
}

/// The totals of a run so far.
struct Totals {
  var events: EventTally.Counts
  var service: ThumbnailCounts
  /// `loader.count`.
  var entries: Int
  /// The keys with a claim: the visible rows.
  var claimed: Int
}

/// One visible row: its claim on the row's thumbnail, and every snapshot the cell drew.
final class Cell: Sendable {
  let row: Int
  let item: CatalogItem
  let claim: ThumbnailLoader.Claim
  private let drawn: Locked<[ThumbnailLoader.Snapshot]>

  /// Claims the item's thumbnail. The handler gets the key's current snapshot first — usually
  /// before `begin` returns, so a cached thumbnail shows without a blank frame — then every
  /// change, until the claim ends.
  init(row: Int, item: CatalogItem, loader: ThumbnailLoader, changes: ChangeSignal) {
    let drawn = Locked<[ThumbnailLoader.Snapshot]>([])
    self.row = row
    self.item = item
    self.drawn = drawn
    claim = loader.begin(item.id) { snapshot in
      drawn.withLock { $0.append(snapshot) }
      changes.signal()
    }
  }

  /// The snapshots the cell drew, in order.
  var frames: [ThumbnailLoader.Snapshot] { drawn.withLock { $0 } }

  /// How many times the cell went to `loading`: the loads it showed starting.
  var loadsShown: Int {
    var count = 0
    var previous: LoadStatus?
    for frame in frames {
      if frame.status == .loading && previous != .loading { count += 1 }
      previous = frame.status
    }
    return count
  }

  /// The frames as the cell drew them, from frame `start` on: `r2 loading → r3 loaded`, with `—`
  /// for no thumbnail.
  func history(from start: Int = 0) -> String {
    frames.dropFirst(start).map { frame in "\(frame.value?.description ?? "—") \(frame.status)" }
      .joined(separator: " → ")
  }
}

/// Counts the loader's events, from ``ContentLoader/events``.
final class EventTally: Sendable {
  struct Counts: Sendable {
    var loading = 0
    var loadingWithPriorValue = 0
    var loaded = 0
    var failed = 0
    var cancelled = 0
    var evicted = 0

    var started: Int { loading + loadingWithPriorValue }
    var ended: Int { loaded + failed + cancelled }
  }

  private let state = Locked<(counts: Counts, evicted: [String])>((Counts(), []))
  private let task: Task<Void, Never>

  init(_ events: AsyncStream<ThumbnailLoader.Event>, changes: ChangeSignal) {
    let state = state
    task = Task.detached {
      for await event in events {
        state.withLock { state in
          switch event {
          case .loading: state.counts.loading += 1
          case .loadingWithPriorValue: state.counts.loadingWithPriorValue += 1
          case .loaded: state.counts.loaded += 1
          case .failed: state.counts.failed += 1
          case .cancelled: state.counts.cancelled += 1
          case .evicted(let key):
            state.counts.evicted += 1
            state.evicted.append(key)
          }
        }
        changes.signal()
      }
    }
  }

  var counts: Counts { state.withLock { $0.counts } }

  /// The evicted keys, in the order they were evicted.
  var evictedKeys: [String] { state.withLock { $0.evicted } }

  /// Stops counting.
  func stop() { task.cancel() }
}

/// Wakes a waiter when something changed: a cell drew, the service logged, an event arrived.
///
/// The waiter checks its condition, and if it does not hold yet, waits for the next change. The
/// buffer keeps the newest signal, so a change between the check and the wait is not lost. If
/// the condition still does not hold after `timeout`, the run stops with what it waits for: a
/// stuck run is a bug to see, not a hang.
final class ChangeSignal: Sendable {
  private let stream: AsyncStream<Void>
  private let continuation: AsyncStream<Void>.Continuation
  private let waitingFor = Locked<String?>(nil)
  private let watchdog: Task<Void, Never>

  init(timeout: Duration) {
    (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    let waitingFor = waitingFor
    watchdog = Task.detached {
      do { try await Task.sleep(for: timeout) } catch { return }
      print("Thumbnails: nothing settled after \(timeout); still waiting for \(waitingFor.withLock { $0 } ?? "nothing")")
      exit(1)
    }
  }

  func signal() {
    continuation.yield()
  }

  /// Waits until `pending` returns `nil`; it is called again after every change.
  @MainActor
  func wait(until pending: () -> String?) async {
    var iterator = stream.makeAsyncIterator()
    while let what = pending() {
      waitingFor.withLock { $0 = what }
      await iterator.next()
    }
    waitingFor.withLock { $0 = nil }
  }

  /// The run is over: stops the watchdog.
  func finish() {
    watchdog.cancel()
    continuation.finish()
  }
}
