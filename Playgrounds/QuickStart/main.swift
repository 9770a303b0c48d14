// QuickStart: a walk through the four states of an AsyncLoadable.
//
//     swift run QuickStart
//
// A simulated portal service is down for its first request and up afterwards. We load it, see
// the failure stick, retry, refresh, and cancel — printing every status change as it happens.
import LoadableKit
import Synchronization

struct PortalInfo: Sendable {
  var name: String
  var itemCount: Int
}

struct ServiceUnavailable: Error, CustomStringConvertible {
  var description: String { "503 Service Unavailable" }
}

/// A stand-in for a portal web service: fails its first request, then answers with a growing
/// item count. `hang` makes the next request wait until it is cancelled.
final class PortalService: Sendable {
  private let requests = Atomic<Int>(0)
  private let answers = Atomic<Int>(0)
  let hang = Atomic<Bool>(false)

  func info() async throws -> PortalInfo {
    let request = requests.wrappingAdd(1, ordering: .relaxed).newValue
    print("    → request to the portal service")
    if hang.load(ordering: .relaxed) {
      try await Task.sleep(for: .seconds(3600))  // ends early when the attempt is cancelled
    }
    if request == 1 { throw ServiceUnavailable() }
    let answer = answers.wrappingAdd(1, ordering: .relaxed).newValue
    return PortalInfo(name: "City of Redlands", itemCount: 40 + answer)
  }
}

let service = PortalService()
let portal = AsyncLoadable { try await service.info() }

// Print every status change, in order, starting with the current one.
let trace = portal.observeLoadStatus { status in print("  [status] \(status)") }

func step(_ title: String) { print("\n▸ \(title)") }

step("Three screens ask for the portal at once: one request is made")
await withTaskGroup(of: Void.self) { group in
  for screen in ["map", "search", "profile"] {
    group.addTask {
      do {
        try await portal.load()
      } catch {
        print("  \(screen) screen: load failed: \(error)")
      }
    }
  }
}

step("The failure sticks: load() rethrows it without a new request")
do {
  try await portal.load()
} catch {
  print("  load() threw again: \(error)")
}

step("retryLoad() makes a new attempt")
try await portal.retryLoad()
if let info = portal.content {
  print("  loaded \(info.name) with \(info.itemCount) items")
}

step("fetchIfNeeded() answers from memory; fetch() refreshes and keeps the old content meanwhile")
let cached = try await portal.fetchIfNeeded()
print("  cached: \(cached.itemCount) items")
let fresh = try await portal.fetch()
print("  refreshed: \(fresh.itemCount) items")

step("cancelLoad() stops a refresh that takes too long")
service.hang.store(true, ordering: .relaxed)
portal.sync()
portal.cancelLoad()
print("  status: \(portal.loadStatus), error: \(portal.loadError.map { "\(type(of: $0))" } ?? "none")")
print("  the old content is still there: \(portal.content?.itemCount ?? 0) items")
service.hang.store(false, ordering: .relaxed)

step("A retry recovers")
try await portal.retryLoad()
print("  status: \(portal.loadStatus), \(portal.content?.itemCount ?? 0) items")
trace.cancel()
print("\nDone.")
