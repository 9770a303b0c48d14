// PagedSearch: a portal search that loads page by page with PagedLoadable.
//
//     swift run PagedSearch
//     swift run PagedSearch --server http://127.0.0.1:8080    # over HTTP, against Server/'s example-server
//
// The portal's search answers with ArcGIS REST's paging fields (`total`, `start`, `num`,
// `nextStart`, which is -1 on the last page). We load the first page, scroll to the next one from
// three cells at once, ride out a page that fails and retry it, bound the pages held, and refresh
// while a page is loading. The rows shown claim their thumbnails from a ContentLoader: a row that
// appears begins a claim, a row whose page is dropped ends it.
//
// The run is the same every time, and the same in-process and over HTTP: the portal's network
// (ExampleServices' SimulatedServer) fails and stalls at the request the story chooses — a
// scheduled outage, held requests released when the story says — never after some time.
import ExampleServices
import Foundation
import LoadableKit

let server = RedlandsServices.commandLineServer
let services = RedlandsServices(server: server)
let network = services.portal.server  // the portal's latency, outages and stalls, both ways

let thumbnailService: any ThumbnailServing
if let server {
  // The example server's thumbnail service: it knows the items the search finds.
  do {
    thumbnailService = try await ThumbnailClient(baseURL: server, latency: RedlandsServices.defaultLatency, onChange: {})
  } catch {
    exitCannotReach(server, error)
  }
} else {
  thumbnailService = ThumbnailService(
    items: ThumbnailCatalog.portalSearch(), latency: RedlandsServices.defaultLatency, onChange: {})
}

let portal = AsyncLoadable(name: "portal") { try await services.portal.portalInfo().name }

/// The search requests made, in order; `printRequests()` prints the new ones.
let requests = Locked<(made: [String], printed: Int)>(([], 0))

/// The search: the cursor is ArcGIS REST's `start`; a `nextStart` of -1 means no next page.
let search = PagedLoadable<Int, PortalSearchItem>(name: "search", maximumPages: 2) { start in
  let start = start ?? 1
  requests.withLock { $0.made.append("GET /sharing/rest/search?q=parks&start=\(start)&num=5") }
  let answer = try await services.portal.search("parks", start: start, num: 5)
  return Page(items: answer.results, nextCursor: answer.nextStart == -1 ? nil : answer.nextStart)
}
search.addDependency(portal)  // the first page waits for the portal

/// Each row's thumbnail, claimed while the row is shown. The revision is the version.
let thumbnailRequests = Locked(0)
let thumbnails = ContentLoader<String, Thumbnail, Int>(name: "thumbnails", idleTimeout: nil, maximumIdleCount: 10) { itemID in
  thumbnailRequests.withLock { $0 += 1 }
  let thumbnail = try await thumbnailService.thumbnail(for: itemID)
  return (thumbnail, thumbnail.revision)
}
/// The claims of the rows shown, by item id.
var claims: [String: ContentLoader<String, Thumbnail, Int>.Claim] = [:]

var requestCount: Int { requests.withLock { $0.made.count } }

func step(_ title: String) { print("\n▸ \(title)") }

/// Prints the search requests made since the last call.
func printRequests() {
  let new = requests.withLock { requests in
    defer { requests.printed = requests.made.count }
    return requests.made.dropFirst(requests.printed)
  }
  for request in new { print("    → \(request)") }
}

@MainActor func show() async {
  printRequests()
  let content = search.content
  let titles = search.items.map(\.title).joined(separator: ", ")
  let dropped = content?.droppedPageCount ?? 0
  print("  \(content?.pages.count ?? 0) page(s) held\(dropped > 0 ? ", \(dropped) dropped before" : ""): \(titles)")
  print("  hasPreviousPage: \(search.hasPreviousPage), hasNextPage: \(search.hasNextPage)")
  await claimThumbnails()
}

/// The rows shown claim their thumbnails: a row that appeared begins a claim, a row that is gone
/// ends its claim (its entry stays, idle, up to the loader's `maximumIdleCount`). Waits until
/// every row shown has its thumbnail, then prints them, and how many requests they took.
@MainActor func claimThumbnails() async {
  let shown = search.items.map(\.id)
  let gone = claims.keys.filter { !shown.contains($0) }
  for id in gone { claims.removeValue(forKey: id)?.end() }
  let requestsBefore = thumbnailRequests.withLock { $0 }
  let appeared = shown.filter { claims[$0] == nil }
  for id in appeared { claims[id] = thumbnails.begin(id) }
  var drawn: [String] = []
  for id in shown {
    for await snapshot in claims[id]!.updates where snapshot.status == .loaded || snapshot.status == .failed {
      drawn.append(snapshot.value.map { "\($0)" } ?? "failed")
      break
    }
  }
  let requestsMade = thumbnailRequests.withLock { $0 } - requestsBefore
  print("  thumbnails: \(appeared.count) claims begun, \(gone.count) ended, \(requestsMade) requests: \(drawn.joined(separator: " "))")
}

step("1. The first page loads like any loadable, after the portal")
try await search.load()
await show()

step("2. Three cells reach the end of the list at once: one request for the next page")
network.holdRequests(after: 0)  // a slow network: the request waits, and the three ask meanwhile
let cells = (0..<3).map { _ in Task { try await search.loadNextPage() } }
await network.waitUntilRequestHeld()
for _ in 0..<10 { await Task.yield() }  // (the cells, on the main actor, ask now)
print("  next page: \(search.nextPageStatus), the first page still shown: \(search.items.count) items")
try await network.releaseHeldRequests()
for cell in cells { try await cell.value }
print("  requests so far: \(requestCount)")
await show()

step("3. The next page fails: the pages stay, and the failure sticks until a retry")
network.scheduleOutage(after: 0, failing: 1)
do { try await search.loadNextPage() } catch { print("  loadNextPage() threw: \(error)") }
let before = requestCount
do { try await search.loadNextPage() } catch { print("  again, without a request: \(error)") }
print("  requests made meanwhile: \(requestCount - before)")
print("  status: \(search.loadStatus), next page: \(search.nextPageStatus)")
await show()
try await search.retryNextPage()
print("  retryNextPage() loaded it; maximumPages is 2, so the first page was dropped")
await show()

step("4. Scrolling back loads the dropped page again from its cursor; its rows' thumbnails are still loaded")
try await search.loadPreviousPage()
await show()

step("5. A refresh while the next page loads supersedes it; the fresh first page replaces the pages")
network.holdRequests(after: 0)  // the next page's request waits until the refresh cancels it
let scrolling = Task { try await search.loadNextPage() }
await network.waitUntilRequestHeld()
print("  next page: \(search.nextPageStatus)")
search.sync()
print("  after sync(): status \(search.loadStatus), next page \(search.nextPageStatus)")
try await network.releaseHeldRequests()  // the fresh first page's request goes on
try await scrolling.value  // the scrolling caller waited for the fresh first page
await show()

step("6. The dependency tree shows the failed next page under the search")
network.scheduleOutage(after: 0, failing: 1)
do { try await search.loadNextPage() } catch { print("  loadNextPage() threw: \(error)") }
printRequests()
print(search.dependencyTree(showingDurations: false).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

for claim in claims.values { claim.end() }
(thumbnailService as? ThumbnailClient)?.stop()
print("\nDone.")
