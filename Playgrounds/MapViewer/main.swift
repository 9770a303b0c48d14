// MapViewer: a map of Redlands, loaded from the City of Redlands portal.
//
//     swift run MapViewer
//     LATENCY_MS=300 swift run MapViewer     # watch it load slowly
//
// The resources are AsyncLoadable subclasses (Resources.swift) wired with dependencies:
//
//     map ── basemap (required) ── item ── portal
//      ├──── Parks  (incidental) ── table ── item ── portal
//      └──── Trails (incidental) ── table ── item ── portal
//
// We open the map during a portal outage, retry once the portal is back, watch a broken layer
// fail without failing the map, cancel a slow layer, override a layer's scale before it loads,
// and end with the dependency tree and the trace of opening the map, attempt by attempt.
import ExampleServices
import LoadableKit

let services = RedlandsServices(server: RedlandsServices.commandLineServer)
print("MapViewer: a map of Redlands from the City of Redlands portal")
print("(simulated services, \(formatDuration(RedlandsServices.defaultLatency)) per request)")

// Build the graph. Creating loadables loads nothing.
let portal = Portal(service: services.portal).named("portal")

func portalItem(_ id: String, _ name: String) -> PortalItem {
  PortalItem(portal: portal, id: id).named(name)
}

func featureLayer(_ title: String, item id: String) -> FeatureLayer {
  let table = FeatureTable(item: portalItem(id, "\(title) item"), layerID: 0, server: services.gis)
  return FeatureLayer(featureTable: table.named("\(title) table")).named(title)
}

let basemap = Basemap(item: portalItem(RedlandsItems.topographic, "Topographic item"), server: services.gis)
  .named("basemap")
let parks = featureLayer("Parks", item: RedlandsItems.parks)
let trails = featureLayer("Trails", item: RedlandsItems.trails)
let map = Map(basemap: basemap, operationalLayers: [parks, trails]).named("map")

// Record every status change of the map and of everything it depends on. The trace prints one
// line per loadable, along the dependency tree: who waits for whom.
let trace = StatusTrace()
trace.watch(map)

// Hear of every attempt while the map opens through the outage (steps 1 and 2), through the
// library's instrument hook: who asked for whom, how each attempt ended, how long it took.
let attempts = AttemptTrace()
LoadInstrumentation.processWide = attempts

func portalRequests() -> Int { services.portal.server.requestCount(path: "/sharing/rest/portals/self") }

// MARK: - 1. An outage

printStep("1. Open the map while the portal is down")
services.portal.server.isDown = true
do {
  try await map.load()
} catch {
  print("    map.load() threw \(describe(error))")
}
_ = await loadAll(map.operationalLayers)  // the map does not wait for its layers; the trace does
await trace.print(map)
print("    The basemap needs its item and the item needs the portal: one 503 fails all three,")
print("    and the map with them. The layers failed too, on their own: the map started them but")
print("    did not wait for them.")
do {
  try await map.load()
} catch {
  print("    map.load() again: \(describe(error)) at once, without a request (the failure sticks)")
}
print("    portal requests so far: \(portalRequests()), shared by the three items that asked")

// MARK: - 2. Retry

printStep("2. The portal is back: map.retryLoad() retries the whole failed chain")
services.portal.server.isDown = false
let requestsBefore = portalRequests()
try await map.retryLoad()
_ = await loadAll(map.operationalLayers)
await trace.print(map)
print("    Each branch loads bottom-up: the portal first, then the items, then the basemap and the")
print("    tables. The map waited for its basemap only. The retry reached every failed link; the")
print("    portal answered once for all (\(portalRequests() - requestsBefore) request). Trails' service is gone: that layer failed,")
print("    the map did not.")
LoadInstrumentation.processWide = nil  // the map is open: the trace of opening it is complete

// What a map view shows, derived with combinators: `map` makes a live view of loaded content.
let titleBar = zip(portal, basemap).map { portal, basemap in "\(portal.name) · \(basemap.name)" }
let parkNames = parks.featureTable.map { table in
  table.features.compactMap { $0.attributes["NAME"]?.description }.joined(separator: ", ")
}
print("")
printColumns([
  ["title bar", try await titleBar.fetchIfNeeded()],
  ["map", "\(map.loadStatus), in \(map.content!.spatialReference.name) (\(map.content!.spatialReference.wkid)), from its basemap"],
  ["Parks", "\(parks.loadStatus), \(parks.content?.featureCount ?? 0) features: \(try await parkNames.fetchIfNeeded())"],
  ["Trails", "\(trails.loadStatus): \(describe(trails.loadError))"],
])

// MARK: - 3. Cancel

printStep("3. Add the Fire Hydrants layer; its service is slow today, so cancel it")
let hydrants = featureLayer("Fire Hydrants", item: RedlandsItems.hydrants)
hydrants.minScale.value = 5_000  // before loading: this wins over the service's value
map.addOperationalLayer(hydrants)
trace.watch(hydrants)
services.gis.server.slowDown("FireHydrants", by: .seconds(3600))
let opening = Task { try await hydrants.load() }
// Once the item has loaded, the table's request to the slow service is on its way.
for await status in hydrants.featureTable.item.loadStatusUpdates where status == .loaded { break }
hydrants.cancelLoad()
if case .failure(let error) = await opening.result {
  print("    hydrants.cancelLoad(): the waiting load() threw \(describe(error))")
}
await trace.print(hydrants)
print("    The cancel reached the table, whose attempt the layer had started: it stopped the request")
print("    and went back to notLoaded, as it was. The item had finished and stays loaded.")

// MARK: - 4. Retry, and the override

printStep("4. The service is fast again: retry; the minScale set before loading wins")
services.gis.server.slowDown("FireHydrants", by: nil)
try await hydrants.retryLoad()
await trace.print(hydrants)
let overridden = hydrants.minScale.value
hydrants.minScale.removeOverride()
print("")
printColumns([
  ["minScale", formatScale(overridden), "yours, set before loading"],
  ["", formatScale(hydrants.minScale.value), "the service's, after minScale.removeOverride()"],
])

// MARK: - 5. The tree

printStep("5. map.dependencyTreeDescription")
for line in map.dependencyTreeDescription.split(separator: "\n") {
  print("    \(line)")
}

// MARK: - 6. The trace

printStep("6. The trace of opening the map through the outage, attempt by attempt")
for line in attempts.lines(following: map) {
  print("    \(line)")
}
print("    Each attempt sits under the attempt that asked for it (a LoadInstrument's parent link), so")
print("    the outage shows as one 503 at the portal failing its way up, and the retry as the same")
print("    tree loading bottom-up. The three items share one portal attempt: it is shown under the")
print("    first of them in the map's order, whichever asked first. The Integrations package sends")
print("    the same reports to a tracer.")
