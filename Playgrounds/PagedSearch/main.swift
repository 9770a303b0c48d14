// PagedSearch: a portal search that loads page by page with PagedLoadable.
//
//     swift run PagedSearch
//
// An in-process stand-in for a portal's search answers with ArcGIS REST's paging fields (`total`,
// `start`, `num`, `nextStart`, which is -1 on the last page). We load the first page, scroll to
// the next one from three cells at once, ride out a page that fails and retry it, bound the pages
// held, and refresh while a page is loading.
import LoadableKit
import Synchronization

struct PortalItem: Sendable {
  var title: String
}

/// What `GET /sharing/rest/search?q=…&start=…&num=…` answers.
struct SearchResponse: Sendable {
  var total: Int
  var start: Int
  var num: Int
  var nextStart: Int
  var results: [PortalItem]
}

struct ServiceUnavailable: Error, CustomStringConvertible {
  var description: String { "503 Service Unavailable" }
}

/// A stand-in for the portal: 13 parks, found 5 at a time. `failNext` makes the next request fail;
/// `holdNext` makes it wait until it is cancelled; `paused` holds every request until it is reset.
final class PortalSearchService: Sendable {
  let parks = [
    "Brookside Park", "Caroline Park", "Ford Park", "Hillside Memorial", "Jennie Davis Park",
    "Key Park", "Prospect Park", "Redlands Bowl", "Smiley Park", "Sylvan Park", "Texonia Park",
    "Crafton Hills", "San Timoteo Nature Sanctuary",
  ]
  let failNext = Atomic<Bool>(false)
  let holdNext = Atomic<Bool>(false)
  let held = Atomic<Int>(0)
  let requests = Atomic<Int>(0)
  let paused = Atomic<Bool>(false)

  func search(_ query: String, start: Int, num: Int) async throws -> SearchResponse {
    requests.wrappingAdd(1, ordering: .relaxed)
    print("    → GET /sharing/rest/search?q=\(query)&start=\(start)&num=\(num)")
    while paused.load(ordering: .relaxed) { await Task.yield() }
    if holdNext.exchange(false, ordering: .relaxed) {
      held.wrappingAdd(1, ordering: .relaxed)
      try await Task.sleep(for: .seconds(5))  // ends early when the page's load is cancelled
    }
    if failNext.exchange(false, ordering: .relaxed) { throw ServiceUnavailable() }
    let results = parks.dropFirst(start - 1).prefix(num).map { PortalItem(title: $0) }
    let next = start + num <= parks.count ? start + num : -1
    return SearchResponse(total: parks.count, start: start, num: num, nextStart: next, results: Array(results))
  }
}

let service = PortalSearchService()
let portal = AsyncLoadable(name: "portal") { "City of Redlands" }

/// The search: the cursor is ArcGIS REST's `start`; a `nextStart` of -1 means no next page.
let search = PagedLoadable<Int, PortalItem>(name: "search", maximumPages: 2) { start in
  let answer = try await service.search("parks", start: start ?? 1, num: 5)
  return Page(items: answer.results, nextCursor: answer.nextStart == -1 ? nil : answer.nextStart)
}
search.addDependency(portal)  // the first page waits for the portal

func step(_ title: String) { print("\n▸ \(title)") }

func show() {
  let content = search.content
  let titles = search.items.map(\.title).joined(separator: ", ")
  let dropped = content?.droppedPageCount ?? 0
  print("  \(content?.pages.count ?? 0) page(s) held\(dropped > 0 ? ", \(dropped) dropped before" : ""): \(titles)")
  print("  hasPreviousPage: \(search.hasPreviousPage), hasNextPage: \(search.hasNextPage)")
}

step("1. The first page loads like any loadable, after the portal")
try await search.load()
show()

step("2. Three cells reach the end of the list at once: one request for the next page")
service.paused.store(true, ordering: .relaxed)  // a slow network: the three ask while it runs
let cells = (0..<3).map { _ in Task { try await search.loadNextPage() } }
while service.requests.load(ordering: .relaxed) < 2 { await Task.yield() }
for _ in 0..<10 { await Task.yield() }  // (the cells, on the main actor, ask now)
print("  next page: \(search.nextPageStatus), the first page still shown: \(search.items.count) items")
service.paused.store(false, ordering: .relaxed)
for cell in cells { try await cell.value }
print("  requests so far: \(service.requests.load(ordering: .relaxed))")
show()

step("3. The next page fails: the pages stay, and the failure sticks until a retry")
service.failNext.store(true, ordering: .relaxed)
do { try await search.loadNextPage() } catch { print("  loadNextPage() threw: \(error)") }
let before = service.requests.load(ordering: .relaxed)
do { try await search.loadNextPage() } catch { print("  again, without a request: \(error)") }
print("  requests made meanwhile: \(service.requests.load(ordering: .relaxed) - before)")
print("  status: \(search.loadStatus), next page: \(search.nextPageStatus)")
show()
try await search.retryNextPage()
print("  retryNextPage() loaded it; maximumPages is 2, so the first page was dropped")
show()

step("4. Scrolling back loads the dropped page again from its cursor")
try await search.loadPreviousPage()
show()

step("5. A refresh while the next page loads supersedes it; the fresh first page replaces the pages")
service.holdNext.store(true, ordering: .relaxed)
let scrolling = Task { try await search.loadNextPage() }
while service.held.load(ordering: .relaxed) == 0 { await Task.yield() }
print("  next page: \(search.nextPageStatus)")
search.sync()
print("  after sync(): status \(search.loadStatus), next page \(search.nextPageStatus)")
try await scrolling.value  // the scrolling caller waited for the fresh first page
show()

step("6. The dependency tree shows the failed next page under the search")
service.failNext.store(true, ordering: .relaxed)
do { try await search.loadNextPage() } catch { print("  loadNextPage() threw: \(error)") }
print(search.dependencyTree(showingDurations: false).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
print("\nDone.")
