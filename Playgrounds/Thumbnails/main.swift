// Thumbnails: a ContentLoader behind a scrolling list of portal items.
//
//     swift run Thumbnails
//
// A list of 200 portal items shows 6 rows at a time, each with the item's thumbnail. A row that
// scrolls into view claims its thumbnail from a ContentLoader (`begin`); a row that scrolls away
// ends its claim. Thumbnails the disk cache kept from the last session show at once while the
// thumbnail service is asked for the current ones; a load nobody needs any more is cancelled; a
// slow, stale response never replaces a newer thumbnail; idle thumbnails beyond 12 are evicted.
// Step 9 flings 200 rows on simulated time, with and without `maximumConcurrentLoads` and
// priorities, and compares the requests the service saw and when the visible rows were drawn.
// Step 10 pulls to refresh during slow loads; step 11 writes an edited thumbnail to the loader
// without a request, and step 12 drops every idle thumbnail on a memory warning. Step 13 reads
// the disk cache asynchronously and shows its copy while the network loads (interim values).
//
// The run is the same every time: the simulated service holds requests until it is told to
// answer them, and after each scroll the list waits until the cells, the loader's events and the
// service's log have settled (ThumbnailList.swift) — never for some time.
import ExampleServices
import Foundation
import LoadableKit

let items = Catalog.redlands(count: 200)
let changes = ChangeSignal(timeout: .seconds(60))
let service: any ThumbnailServing
if let url = RedlandsServices.commandLineServer {
  // The example server's thumbnail service, over HTTP: it holds, answers and logs the requests.
  do {
    service = try await ThumbnailClient(baseURL: url, latency: RedlandsServices.defaultLatency, onChange: changes.signal)
  } catch {
    exitCannotReach(url, error)
  }
  FileHandle.standardError.write(Data("(steps 9, 10 and 13 stay in-process, on simulated time: see the README)\n".utf8))
} else {
  service = ThumbnailService(
    items: ThumbnailCatalog.redlands(count: items.count), latency: RedlandsServices.defaultLatency, onChange: changes.signal)
}
let cache = ThumbnailCache(lastSessionOf: items)
let maximumIdleCount = 12

let thumbnails = ContentLoader<String, Thumbnail, Int>(
  idleTimeout: nil,  // this run evicts by count only; an app would also evict after some idle time
  maximumIdleCount: maximumIdleCount,
  existingValue: { itemID in
    cache.thumbnail(for: itemID).map { ($0, $0.revision) }  // shown at once, with the status loading
  },
  load: { itemID in
    let thumbnail = try await service.thumbnail(for: itemID)
    cache.store(thumbnail)
    return (thumbnail, thumbnail.revision)  // the revision is the version: older never wins
  }
)
let list = ThumbnailList(items: items, rowsPerScreen: 6, loader: thumbnails, service: service, changes: changes)

print("Thumbnails: a ContentLoader behind a list of \(items.count) portal items, \(list.rowsPerScreen) rows on screen")
print("(the disk cache holds \(cache.count) thumbnails from the last session, most of them out of date;")
print(" simulated thumbnail service, \(formatDuration(service.server.latency)) per request)")

// MARK: - 1. The list opens

printStep("1. The list opens on rows 0–5: cached thumbnails show at once, fresh ones replace them")
var before = list.totals
list.scroll(to: 0)
await list.settle()
printCells(list.visible)
list.printChanges(since: before)

// MARK: - 2. Scrolled away before the thumbnails arrive

printStep("2. On a slow network, the user scrolls two screens down before anything arrives")
before = list.totals
service.holdRequests()
let passing = list.scroll(to: 6).appeared
await list.settle()
print("    \(rows(passing)) appear; their \(service.counts.held) requests wait at the service")
list.scroll(to: 12)
await list.settle()
let cancelled = list.totals.events.cancelled - before.events.cancelled
print("    \(rows(list.visible)) appear and \(rows(passing)) scroll away: their \(cancelled) loads are cancelled")
try await service.answerHeldRequests()
await list.settle()
print("    the service answers the requests of \(rows(list.visible)):")
printCells(passing + list.visible, note: { cell in list.visible.contains { $0 === cell } ? origin(cell) : "scrolled away: cancelled" })
let cancelledEntries = passing.map { thumbnails.snapshot(for: $0.item.id)! }
print("    their entries are idle, \(Set(cancelledEntries.map { "\($0.status)" }).sorted().joined(separator: ", ")), "
  + "with the cached thumbnails they had (\(cancelledEntries.filter { $0.value != nil }.count) of \(passing.count))")
list.printChanges(since: before)

// MARK: - 3. Eviction

printStep("3. Scrolling on: idle entries beyond \(maximumIdleCount) are evicted, least recently used first")
before = list.totals
let leaving = list.scroll(to: 18).disappeared
await list.settle()
let evicted = list.events.evictedKeys.dropFirst(before.events.evicted)
let evictedRows = list.scrolledAway.filter { evicted.contains($0.item.id) }
let emptyRows = evictedRows.filter { $0.frames.last?.value == nil }
print("    \(rows(leaving)) go idle: \(before.entries - before.claimed + leaving.count) idle entries; "
  + "\(evicted.count) are evicted: the \(emptyRows.count) with nothing to show first, then the least recently used")
print("    evicted rows: \(evictedRows.map { "\($0.row)" }.joined(separator: ", "))")
list.printChanges(since: before)

// MARK: - 4. Back up

printStep("4. The user scrolls back up to row 9")
before = list.totals
list.scroll(to: 9)
await list.settle()
printCells(list.visible)
list.printChanges(since: before)

// MARK: - 5. A slow, stale response

let stale = list.cell(12)
printStep("5. \(stale.item.title): a slow, stale response arrives after a newer one")
before = list.totals
let drawnBefore = stale.frames.count
service.holdNextRequest(for: stale.item.id)
list.refresh(row: 12)  // request A, which the service holds: a slow response
await list.settle()
let uploaded = try await service.uploadNewThumbnail(for: stale.item.id)
list.refresh(row: 12)  // while A still runs: request B asks at once, and A is cancelled
await list.settle()
try await service.answerHeldRequests()  // A answers at last, with the thumbnail it found: the old one
await list.settle()
print("    refresh: request A asks for the thumbnail, and is slow; meanwhile the owner uploads r\(uploaded)")
print("    refresh again while A runs: request B asks at once and supersedes A, whatever A is doing")
let onScreen = stale.frames.last!.value!
for (name, request) in zip(["A", "B"], service.requests.dropFirst(before.service.requests)) {
  guard let answer = request.answer else {
    print("    request \(name) was cancelled: nothing of it can be drawn")
    continue
  }
  let drawn = answer.revision == onScreen.revision
  let older = answer.revision < onScreen.revision ? "older than r\(onScreen.revision), " : ""
  print("    request \(name) answers r\(answer.revision): \(drawn ? "drawn" : older + "not drawn")")
}
print("    the cell drew \(stale.history(from: drawnBefore - 1)), and still shows \(onScreen)")
list.printChanges(since: before)

// MARK: - 6. An outage

let broken = list.cell(13)
printStep("6. \(broken.item.title): a refresh fails during an outage, and the cell keeps its thumbnail")
before = list.totals
let drawnBeforeOutage = broken.frames.count
let newer = try await service.uploadNewThumbnail(for: broken.item.id)
service.server.isDown = true
list.refresh(row: 13)
await list.settle()
let failure = broken.frames.last!
print("    its owner uploads r\(newer), but the service is down: \(failure.status), \(describe(failure.error)), still showing \(failure.value!)")
service.server.isDown = false
list.refresh(row: 13)
await list.settle()
print("    the service is back; refresh again: \(broken.frames.last!.value!) \(broken.frames.last!.status)")
print("    the cell drew \(broken.history(from: drawnBeforeOutage - 1))")
list.printChanges(since: before)

// MARK: - 7. A fling

let bottom = items.count - list.rowsPerScreen
let tops = Array(stride(from: 15, to: bottom, by: list.rowsPerScreen)) + [bottom]
printStep("7. A fling to the bottom: \(tops.count) screens pass before the slow network answers anything")
before = list.totals
service.holdRequests()
var passed: [Cell] = []
for top in tops {
  passed += list.scroll(to: top).disappeared
  await list.settle()
}
let flung = list.totals
try await service.answerHeldRequests()
await list.settle()
let loadsFlungAway = passed.filter { $0.frames.last?.status == .loading }
print("    \(passed.count) rows passed; the \(loadsFlungAway.count) still loading when they left were cancelled:")
print("    \(flung.events.cancelled - before.events.cancelled) cancelled events, "
  + "\(flung.service.cancelled - before.service.cancelled) requests cancelled before an answer")
print("    the list stops at \(rows(list.visible)); the service answers their \(list.visible.count) requests:")
printCells(list.visible)
list.printChanges(since: before)

// MARK: - 8. The screen closes

printStep("8. The screen closes: every claim ends")
before = list.totals
list.close()
await list.settle()
print("    nothing is left loading; \(thumbnails.count) idle entries stay in memory, "
  + "the \(maximumIdleCount) most recently used (maximumIdleCount \(maximumIdleCount))")
list.printChanges(since: before)

// MARK: - 9. A fling with and without a limit and priorities

printStep("9. A fling of 200 rows, without and with maximumConcurrentLoads 6 and priorities")
print("    12 rows a frame (16 ms), 12 rows prefetched past the screen; the link is shared by the requests")
print("    in flight (a thumbnail alone takes 40 ms); simulated time, a loader and a service of its own")
let unlimited = fling(limited: false)
let limited = fling(limited: true)
printColumns([
  ["", "requests", "cancelled", "answered", "most at once", "visible rows drawn", "all 18 drawn"],
] + [("no limit, prefetch claimed as visible", unlimited), ("limit 6, visible before prefetch", limited)].map { name, run in
  [
    name, "\(run.counts.started)", "\(run.counts.cancelled)", "\(run.counts.answered)", "\(run.peakInFlight)",
    milliseconds(run.visibleDrawn), milliseconds(run.allDrawn),
  ]
})
print("    (times after the list stops)")
print("    with the limit, a row prefetched and flung past before its turn sends no request, and the visible")
print("    rows where the list stops have the link before the rows prefetched past them")

// MARK: - 10. Pull to refresh during slow loads

printStep("10. Pull to refresh while the screen's 6 rows load from a slow server")
print("    each answer takes 2 s; the user pulls 500 ms into the loads; simulated time")
let refreshRuns = [
  ("requests that stop when cancelled", pullToRefresh(ignoresCancellation: false)),
  ("work that ignores cancellation", pullToRefresh(ignoresCancellation: true)),
]
printColumns([
  ["", "requests", "first fresh row drawn", "all fresh rows drawn", "stale rows drawn after the pull"],
] + refreshRuns.map { name, run in
  [name, "\(run.requests)", milliseconds(run.firstFreshDrawn), milliseconds(run.allFreshDrawn), "\(run.staleDrawnAfterThePull)"]
})
print("    (times after the pull) each fresh request is sent at the pull and supersedes the running load;")
print("    a stale answer that still comes is dropped, never drawn over the fresh one")

// MARK: - 11. A local edit

printStep("11. The owner replaces a thumbnail in the app: the app writes it to the loader, no request")
before = list.totals
let idle = items.first { thumbnails.snapshot(for: $0.id)?.status == .loaded }!
let held = thumbnails.snapshot(for: idle.id)!.value!
let edited = Thumbnail(itemID: idle.id, revision: held.revision + 1)
let written = list.write(edited)
await list.settle()
print("    \(idle.title), idle in the loader with \(held): written \(edited) (\(written ? "kept" : "refused")); "
  + "the loader now holds \(thumbnails.snapshot(for: idle.id)!.value!)")
let older = list.write(held)
print("    writing \(held) again: \(older ? "kept" : "refused, older than the value held")")
list.printChanges(since: before)

// MARK: - 12. A memory warning

printStep("12. A memory warning: every idle thumbnail is dropped at once")
before = list.totals
let idleBefore = thumbnails.count
let dropped = thumbnails.removeAllIdle()
await list.settle()
print("    \(idleBefore) idle entries, \(dropped) dropped (removeAllIdle); \(thumbnails.count) left")
list.printChanges(since: before)

// MARK: - 13. A disk copy read asynchronously

printStep("13. A row whose thumbnail is on disk: the disk is read asynchronously, then the network (interim values)")
// A loader of its own, in-process, so that the totals above stay the list's. Its load reads the
// disk cache asynchronously — off the thread that claims the row — and shows the copy while the
// network loads (`interim.deliver`), instead of reading it in the synchronous `existingValue`.
let disk = DiskReads(cache)
let network = ThumbnailService(
  items: ThumbnailCatalog.redlands(count: items.count), latency: .milliseconds(1), onChange: {})
let diskFirst = ContentLoader<String, Thumbnail, Int>(
  idleTimeout: nil,
  load: { itemID, interim in
    if let copy = await disk.thumbnail(for: itemID) {
      interim.deliver(copy, version: copy.revision)  // shown at once, still loading
    }
    let fresh = try await network.thumbnail(for: itemID)
    cache.store(fresh)
    return (fresh, fresh.revision)
  })
let outdatedOnDisk = items.first { item in
  cache.thumbnail(for: item.id).map { $0.revision < item.thumbnailRevision } ?? false
}
if let outdated = outdatedOnDisk {
  network.holdNextRequest(for: outdated.id)  // a slow network: the disk copy shows first
  let frames = Locked<[String]>([])
  let claim = diskFirst.begin(outdated.id) { snapshot in
    let frame = "\(snapshot.value.map { "\($0)" } ?? "—") \(snapshot.status)"
    frames.withLock { if $0.last != frame { $0.append(frame) } }  // a change may be told twice
    changes.signal()
  }
  await changes.wait { claim.snapshot.value == nil ? "the disk copy of \(outdated.title)" : nil }
  network.answerHeldRequests()
  // Waits for the cell to have drawn the answer, not for the key to hold it: the handler is called
  // after the key changed, maybe on another thread, and no call starts once the claim ended.
  await changes.wait {
    frames.withLock { $0.last?.hasSuffix(" \(LoadStatus.loaded)") ?? false } ? nil : "\(outdated.title) loaded from the network"
  }
  claim.end()
  print("    \(outdated.title): \(frames.withLock { $0 }.joined(separator: " → "))")
  print("    the disk copy showed while its request waited at the network; then the current thumbnail replaced it")
  print("    (\(network.counts.requests) request; the version rule holds between the copy and the answer)")
}

// MARK: - Summary

let totals = list.totals
let (events, requests) = (totals.events, totals.service)
printStep("Summary")
let loadsCompleted = events.loaded - list.writes  // a value written by the app is a `loaded` event without a load
let ended = (loadsCompleted + events.cancelled + events.failed, requests.answered + requests.cancelled + requests.failed)
let balanced = events.started == ended.0 && requests.requests == ended.1
printColumns([
  ["", "loader events", "service requests"],
  ["loads started", "\(events.started)", "\(requests.requests)"],
  ["completed", "\(loadsCompleted)", "\(requests.answered)"],
  ["cancelled", "\(events.cancelled)", "\(requests.cancelled)"],
  ["failed", "\(events.failed)", "\(requests.failed)"],
  ["evicted", "\(events.evicted)", ""],
  ["written by the app", "\(list.writes)", ""],
])
print("")
print(balanced
  ? "    started = completed + cancelled + failed, in both columns: every load that started ended"
  : "    NOT BALANCED: started \(events.started) and \(requests.requests), ended \(ended.0) and \(ended.1)")
print("    every request is a load with its own events; a load cancelled before it ran made no request")
let bound = list.rowsPerScreen + maximumIdleCount
print("    entries: at most \(list.peakEntries) after any scroll, within \(list.rowsPerScreen) claimed + "
  + "\(maximumIdleCount) idle\(list.peakEntries <= bound ? "" : ": OVER THE BOUND")")
list.events.stop()
(service as? ThumbnailClient)?.stop()
changes.finish()
if !balanced || list.peakEntries > bound { exit(1) }
