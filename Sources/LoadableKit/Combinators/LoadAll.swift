/// Loads several independent loadables at once and reports each one's outcome.
///
/// ArcGIS's "load objects" pattern: a screen that needs a dozen layers starts them together and
/// learns which ones failed, without one failure hiding the others. Every loadable is loaded with
/// `load()` (or `retryLoad()` when `retry` is `true`), concurrently.
///
/// ```swift
/// let outcomes = await loadAll(layers)
/// for (layer, outcome) in zip(layers, outcomes) {
///   if case .failure(let error) = outcome { log("\(layer) failed: \(error)") }
/// }
/// ```
///
/// - Parameters:
///   - loadables: the loadables, in any number.
///   - retry: retry the ones that failed before.
/// - Returns: one result per loadable, in the order given.
public func loadAll(_ loadables: [any Loadable], retry: Bool = false) async -> [Result<Void, any Error>] {
  await withTaskGroup(of: (Int, Result<Void, any Error>).self) { group in
    for (index, loadable) in loadables.enumerated() {
      group.addTask {
        do {
          if retry { try await loadable.retryLoad() } else { try await loadable.load() }
          return (index, .success(()))
        } catch {
          return (index, .failure(error))
        }
      }
    }
    var results = [Result<Void, any Error>](repeating: .success(()), count: loadables.count)
    for await (index, result) in group { results[index] = result }
    return results
  }
}
