// Geocode: the ArcGIS task pattern with a LocatorTask, online and offline.
//
//     swift run Geocode
//
// A task is bound to a locator — a geocode service online, a locator file offline — and is
// loadable: it loads the locator's metadata before its first operation. Default parameters come
// from that metadata and are changed before the call. When the service is down, the app falls
// back to the offline locator, and retries the online one once the service is back.
import ExampleServices
import LoadableKit

let services = RedlandsServices(server: RedlandsServices.commandLineServer)
let online = LocatorTask(service: services.geocoder).named("online task")
let offline = LocatorTask(file: ExampleData.url("Redlands.locator.json")).named("offline task")
let trace = StatusTrace()
trace.watch(online)
trace.watch(offline)
print("Geocode: one LocatorTask, online (a geocode service) and offline (a locator file)")

func rows(_ results: [GeocodeResult]) -> [[String]] {
  results.isEmpty ? [["no match"]] : results.map { [$0.label, $0.type, "score \($0.score)"] }
}

// MARK: - 1. Defaults from the metadata

printStep("1. makeDefaultParameters() loads each task and reads its locator's metadata")
let onlineDefaults = try await online.makeDefaultParameters()
let offlineDefaults = try await offline.makeDefaultParameters()
await trace.print(online, offline)
print("")
printColumns([
  ["", "online", "offline"],
  ["locator", online.content!.info.name, offline.content!.info.name],
  ["maxResults", "\(onlineDefaults.maxResults)", "\(offlineDefaults.maxResults)"],
  ["minScore", "\(onlineDefaults.minScore)", "\(offlineDefaults.minScore)"],
  ["countryCode", onlineDefaults.countryCode ?? "any", offlineDefaults.countryCode ?? "any"],
  ["fields", onlineDefaults.resultAttributeNames.joined(separator: ", "), offlineDefaults.resultAttributeNames.joined(separator: ", ")],
])

// MARK: - 2. Change them before the call

let query = "380 New York Street, Redlands"
printStep("2. Change the defaults before the call: geocode \"\(query)\" online")
print("    with the defaults (maxResults \(onlineDefaults.maxResults), minScore \(onlineDefaults.minScore)):")
printColumns(rows(try await online.geocode(query)), indent: "      ")
var wider = onlineDefaults
wider.minScore = 60
wider.maxResults = 3
print("    with minScore 60, maxResults 3: near misses too")
printColumns(rows(try await online.geocode(query, parameters: wider)), indent: "      ")
print("    \(services.geocoder.server.requestCount(path: "/GeocodeServer")) metadata request for the three calls: the task loaded once")

// MARK: - 3. Online and offline

printStep("3. The same calls, online and offline")
for text in ["380 New York St, Redlands", "125 West Vine Street", "Redlands Bowl"] {
  print("    \"\(text)\"")
  let onlineBest = try await online.geocode(text).first
  let offlineBest = try await offline.geocode(text).first
  printColumns([
    ["online"] + (onlineBest.map { [$0.label, "score \($0.score)"] } ?? ["no match"]),
    ["offline"] + (offlineBest.map { [$0.label, "score \($0.score)"] } ?? ["no match: the file has no places"]),
  ], indent: "      ")
}
let cityHall = Point(x: -117.1827, y: 34.0553)
print("    reverseGeocode(\(cityHall.x), \(cityHall.y))")
printColumns([
  ["online", try await online.reverseGeocode(cityHall) ?? "nothing near"],
  ["offline", try await offline.reverseGeocode(cityHall) ?? "nothing near"],
], indent: "      ")

// MARK: - 4. Outage

/// Geocodes online, and offline when the online task cannot.
func search(_ text: String, with task: LocatorTask) async throws -> String {
  do {
    let best = try await task.geocode(text, parameters: nil).first
    return "online:  \(best?.label ?? "no match")"
  } catch {
    let best = try await offline.geocode(text).first
    return "offline: \(best?.label ?? "no match")  (online: \(describe(error)))"
  }
}

printStep("4. The app starts while the geocode service is down")
services.geocoder.server.isDown = true
let relaunched = LocatorTask(service: services.geocoder).named("relaunched online task")
trace.watch(relaunched)
let address = "25 Grant St"
print("    \(try await search(address, with: relaunched))")
let requests = services.geocoder.server.requestLog.count
print("    \(try await search(address, with: relaunched))")
print("    the second search made \(services.geocoder.server.requestLog.count - requests) requests: the failed load sticks")
services.geocoder.server.isDown = false
try await relaunched.retryLoad()
print("    service back, relaunched.retryLoad():")
print("    \(try await search(address, with: relaunched))")
await trace.print(relaunched)
