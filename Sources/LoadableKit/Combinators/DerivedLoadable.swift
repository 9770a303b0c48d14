import Synchronization

/// A loadable whose content is derived from other loadables, its *sources*.
///
/// The sources are recorded as required dependencies, so every attempt loads them first, with the
/// attempt's intent, and a source's failure fails the derived loadable with the same error. The
/// derived loadable remembers the version of each source it derived from; when a source's content
/// changes afterwards, ``AsyncLoadable/needsSync`` becomes `true` (it is *stale*).
class DerivedLoadable<Content: Sendable>: AsyncLoadable<Content>, @unchecked Sendable {
  let sources: [any DependencyNode]
  /// The version of each source the current content was derived from; the second part is the
  /// loadable a `flatMap` transform returned, with its version.
  private let derivedFrom: Mutex<(sources: [UInt64], inner: (node: any DependencyNode, version: UInt64)?)>

  init(sources: [any DependencyNode]) {
    self.sources = sources
    self.derivedFrom = Mutex((Array(repeating: 0, count: sources.count), nil))
    super.init()
    for source in sources { addDependency(source, kind: .required) }
  }

  /// Loads every source with the running attempt's intent and returns their contents in order.
  /// The declared-dependency step has already loaded them, so this reads the loaded values.
  final func loadSources() async throws -> (values: [any Sendable], versions: [UInt64]) {
    let context = AttemptContext.current
    var values: [any Sendable] = []
    var versions: [UInt64] = []
    values.reserveCapacity(sources.count)
    versions.reserveCapacity(sources.count)
    for source in sources {
      let (value, version) = try await source.loadErased(context?.request(for: source) ?? .load)
      values.append(value)
      versions.append(version)
    }
    return (values, versions)
  }

  /// Loads the loadable a transform returned, with the attempt's intent.
  final func loadInner<T: Sendable>(_ inner: AsyncLoadable<T>) async throws -> (T, UInt64) {
    let request = AttemptContext.current?.request(for: inner) ?? .load
    let delivery = try await inner.request(request)
    guard let content = delivery.content else { throw LoadableError.noContent }
    return (content, delivery.version)
  }

  final func recordDerivation(sources versions: [UInt64], inner: (node: any DependencyNode, version: UInt64)? = nil) {
    derivedFrom.withLock(owner: self) { $0 = (versions, inner) }
  }

  final var derivedVersions: [UInt64] { derivedFrom.withLock(owner: self) { $0.sources } }

  /// The loadable the last `flatMap` transform returned, if any.
  final var innerSource: (any DependencyNode)? { derivedFrom.withLock(owner: self) { $0.inner?.node } }

  override var hasStaleSources: Bool {
    let (seen, inner) = derivedFrom.withLock(owner: self) { ($0.sources, $0.inner) }
    for (source, version) in zip(sources, seen) where source.erasedState.version != version {
      return true
    }
    if let inner, inner.node.erasedState.version != inner.version { return true }
    return false
  }
}

/// A loadable whose content is a pure function of its sources' contents: `map` and `zip`.
///
/// It is a *live view*: created over sources that are all loaded, it is loaded at once; and while
/// it is loaded, a change to a source's content recomputes it (or fails it, when the function
/// throws).
class CombinedLoadable<Content: Sendable>: DerivedLoadable<Content>, @unchecked Sendable {
  private let listeners = Mutex<[UInt64]>([])

  override init(sources: [any DependencyNode]) {
    super.init(sources: sources)
  }

  /// Derives the content at once when every source is loaded (or fails at once when a source
  /// failed), then starts listening to the sources. Subclasses call it at the end of `init`.
  final func startLiveView() {
    let states = sources.map(\.erasedState)
    if states.allSatisfy({ $0.status == .loaded && $0.content != nil }) {
      let result = Result { try combine(states.map { $0.content! }) }
      withState { state in
        switch result {
        case .success(let content):
          state.content = content
          state.contentVersion = 1
          state.status = .loaded
        case .failure(let error):
          state.error = error
          state.status = .failed
        }
      }
      recordDerivation(sources: states.map(\.version))
    } else if let failed = states.first(where: { $0.status == .failed }), let error = failed.error {
      withState { state in
        state.error = error
        state.status = .failed
      }
    }
    let ids = sources.map { source in
      source.addContentListener { [weak self] in self?.sourcesChanged() }
    }
    listeners.withLock(owner: self) { $0 = ids }
  }

  deinit {
    let ids = listeners.withLock(owner: self) { $0 }
    for (source, id) in zip(sources, ids) { source.removeContentListener(id) }
  }

  /// The function of the sources' contents, in source order.
  func combine(_ values: [any Sendable]) throws -> Content {
    preconditionFailure("CombinedLoadable subclasses override combine(_:)")
  }

  override func performLoad() async throws -> Content {
    let (values, versions) = try await loadSources()
    let content = try combine(values)
    recordDerivation(sources: versions)
    return content
  }

  /// A source's content changed: recompute when loaded and idle.
  private func sourcesChanged() {
    guard loadStatus == .loaded else { return }  // not loaded: needsSync already says so
    let states = sources.map(\.erasedState)
    guard states.allSatisfy({ $0.content != nil }) else { return }
    let versions = states.map(\.version)
    guard versions != derivedVersions else { return }
    let result = Result { try combine(states.map { $0.content! }) }
    let effects = withState { state -> LoadStateMachine<Content>.Effects in
      guard state.status == .loaded, state.attempt == nil else { return .init() }
      var effects = LoadStateMachine<Content>.Effects()
      effects.released = .init(attempt: nil, content: state.content, error: state.error)
      switch result {
      case .success(let content):
        state.content = content
        state.contentVersion &+= 1
        effects.changedContent = true
        effects.result = .success(state.delivery)
      case .failure(let error):
        state.error = error
        effects.event = state.setStatus(.failed)
        effects.result = .failure(error)
      }
      return effects
    }
    if effects.changedContent { recordDerivation(sources: versions) }
    perform(effects)
  }
}
