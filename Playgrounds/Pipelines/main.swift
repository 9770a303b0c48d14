// Pipelines: MapViewer's chains written with combinators, next to the subclass style.
//
//     swift run Pipelines
//
// A pipeline derives each loadable from others: `asyncMap` for a step that needs only the one
// before, `map` for a synchronous conversion (a live view), `flatMap` and `joined` for a loadable
// chosen by content, `zip` for independent loadables needed together. The loading rules are the
// same as for subclasses with dependencies: nothing loads until asked, a retry goes up the chain,
// a failure bubbles down.
import ExampleServices
import LoadableKit
import Observation

let services = RedlandsServices(server: RedlandsServices.commandLineServer)
let catalog = Catalog(services: services)
let trace = StatusTrace()
print("Pipelines: MapViewer's chains as map / asyncMap / flatMap / joined / zip")

// MARK: - 1. asyncMap

printStep("1. asyncMap: portal → Parks item → Parks table, then map to a summary")
// catalog.table is `portal.asyncMap { item(id) }.asyncMap { featureLayer(item.url) }`.
let parksTable = catalog.table(itemID: RedlandsItems.parks, name: "Parks")
let parksSummary = parksTable.map { LayerSummary($0) }.named("Parks summary")
trace.watch(parksSummary)

services.portal.server.isDown = true
do {
  try await parksSummary.load()
} catch {
  print("    portal down: parksSummary.load() threw \(describe(error))")
}
services.portal.server.isDown = false
try await parksSummary.retryLoad()
print("    portal back: parksSummary.retryLoad() → \(parksSummary.content!)")
await trace.print(parksSummary)
print("    Each step's parent is a required dependency: the 503 bubbled down the pipeline,")
print("    and the retry went up it to the portal.")

// MARK: - 2. map is live, asyncMap goes stale

printStep("2. map is a live view; asyncMap goes stale")
let parksItem = catalog.item(RedlandsItems.parks)
let itemRow = parksItem.map { "\($0.title) · \($0.type) · \(grouped($0.numViews)) views" }.named("item row")
print("    itemRow, made from a loaded item, is loaded at once: \(itemRow.loadStatus)")
trace.watch(itemRow)
let rowBefore = itemRow.content!

// The way a SwiftUI view would notice: Observation reports the row's new content.
let rowChanged = { () -> Task<Void, Never> in
  let (changes, continuation) = AsyncStream<Void>.makeStream()
  withObservationTracking { _ = itemRow.content } onChange: { continuation.finish() }
  return Task { for await _ in changes {} }
}()
_ = try await parksItem.fetch()  // refresh the item: the portal counts one more view
await rowChanged.value
await trace.print(itemRow)
printColumns([
  ["before parksItem.fetch()", rowBefore],
  ["after", itemRow.content!],
  ["parksTable.needsSync", "\(parksTable.needsSync)"],
])
print("    The row recomputed itself without an attempt (its trace shows no loading). The table,")
print("    an asyncMap of the item, cannot recompute without running again: it is stale until")
print("    fetchIfNeeded() or syncIfNeeded() refreshes it.")
_ = try await parksTable.fetchIfNeeded()
print("    after parksTable.fetchIfNeeded(): needsSync \(parksTable.needsSync)")

// MARK: - 3. flatMap and joined

printStep("3. flatMap and joined: the web map chooses its loadables")
let webMapItem = catalog.item(RedlandsItems.parksAndTrailsMap, name: "web map item")
// joined: the item and its data together.
let webMap = webMapItem.joined { item in
  AsyncLoadable { try await services.portal.webMap(itemID: item.id) }.named("web map data")
}.named("web map")
// flatMap: the basemap item is whichever the web map names, taken from the catalog: the same
// loadable every other screen uses, so it loads once and a retry here retries it there.
let basemapItem = webMap.flatMap { _, definition in
  catalog.item(definition.baseMap.itemId, name: "\(definition.baseMap.title) item")
}.named("basemap")
let basemapInfo = try await basemapItem.fetchIfNeeded()
let (item, definition) = webMap.content!
printColumns([
  ["web map", "\(item.title): \(definition.operationalLayers.map(\.title).joined(separator: ", "))"],
  ["basemap", "\(basemapInfo.title) (\(basemapInfo.type))"],
])
print("")
for line in basemapItem.dependencyTreeDescription.split(separator: "\n") {
  print("    \(line)")
}
print("    The loadables a transform returned (web map data, the Topographic item) hang under it.")

// MARK: - 4. zip

printStep("4. zip: independent loadables needed together")
let hydrantsTable = catalog.table(itemID: RedlandsItems.hydrants, name: "Fire Hydrants")
let statusBar = zip(catalog.portal, parksTable, hydrantsTable).map { portal, parks, hydrants in
  "\(portal.name): \(parks.features.count) parks, \(hydrants.features.count) hydrants"
}
print("    status bar: \(try await statusBar.fetchIfNeeded())")

// The web map's layers as one zip: it fails fast, so one broken layer fails the list.
let layerTables = webMap.flatMap { _, definition in
  zip(definition.operationalLayers.map { catalog.table(itemID: $0.itemId, name: $0.title) })
}
do {
  _ = try await layerTables.fetchIfNeeded()
} catch {
  print("    all the web map's tables, zipped: \(describe(error)) (Trails' service is gone)")
}
// When each outcome matters, load them side by side instead.
let tables = definition.operationalLayers.map { catalog.table(itemID: $0.itemId, name: $0.title) }
let outcomes = await loadAll(tables)
printColumns(zip(definition.operationalLayers, outcomes).map { layer, outcome in
  switch outcome {
  case .success: [layer.title, "loaded"]
  case .failure(let error): [layer.title, "failed: \(describe(error))"]
  }
}, indent: "      ")

// MARK: - 5. Pipeline or subclass

printStep("5. The Parks layer, as a pipeline and as a subclass")
let subclassLayer = FeatureLayer(item: parksItem, server: services.gis).named("Parks layer")
subclassLayer.minScale.value = 50_000  // state set before loading: a pipeline has nowhere to keep it
try await subclassLayer.load()
printColumns([
  ["pipeline", "\(parksSummary.content!)"],
  ["subclass", "\(subclassLayer.content!) (minScale set before loading)"],
])

printStep("When each fits")
printColumns([
  ["map", "a synchronous conversion; stays live as its source refreshes"],
  ["asyncMap", "an asynchronous step that needs only its parent"],
  ["flatMap", "a loadable chosen by the parent's content; an existing one is shared"],
  ["joined", "the same, keeping the parent's content alongside"],
  ["zip", "independent loadables needed together; the first failure fails it"],
  ["loadAll", "several loadables whose outcomes you want one by one"],
  ["subclass", "identity, state set before loading, incidental dependencies (MapViewer)"],
])
