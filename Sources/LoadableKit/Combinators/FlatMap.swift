extension AsyncLoadable {
  /// A loadable whose content is that of the loadable `transform` makes from this one's content.
  ///
  /// Each attempt loads this loadable with the attempt's intent, calls `transform`, and loads the
  /// loadable it returns with the same intent — so a retry retries both, and a `cancelLoad()`
  /// cancels the inner attempt when nobody else wants it. If this loadable fails, `transform` is
  /// not called. When either content changes afterwards, the result is stale until it loads again.
  ///
  /// ```swift
  /// let table: AsyncLoadable<TableInfo> = layer.flatMap { info in FeatureTable(url: info.tableURL) }
  /// ```
  public func flatMap<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<T> {
    FlatMappedLoadable(source: self) { content in
      let inner = try transform(content)
      return (inner, { $0 })
    }
  }

  /// Like ``flatMap(_:)``, but keeps this loadable's content next to the inner one's.
  ///
  /// ```swift
  /// let itemAndPortal: AsyncLoadable<(PortalItem, Portal)> = item.joined { Portal(url: $0.portalURL) }
  /// ```
  public func joined<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<(Content, T)> {
    FlatMappedLoadable(source: self, joins: true) { content in
      let inner = try transform(content)
      return (inner, { (content, $0) })
    }
  }
}

final class FlatMappedLoadable<Source: Sendable, Inner: Sendable, Content: Sendable>: DerivedLoadable<Content>,
  @unchecked Sendable
{
  typealias Step = @Sendable (Source) throws -> (AsyncLoadable<Inner>, @Sendable (Inner) -> Content)
  let step: Step
  /// Made by `joined` rather than `flatMap` (for its name).
  let joins: Bool

  init(source: AsyncLoadable<Source>, joins: Bool = false, step: @escaping Step) {
    self.step = step
    self.joins = joins
    super.init(sources: [source])
  }

  override func performLoad() async throws -> Content {
    let (values, versions) = try await loadSources()
    let (inner, finish) = try step(ContentBox<Source>.unbox(values[0]))
    let (content, innerVersion) = try await loadInner(inner)
    recordDerivation(sources: versions, inner: (inner, innerVersion))
    return finish(content)
  }
}

extension FlatMappedLoadable: CombinatorNaming {
  var combinatorName: String { joins ? "joined" : "flatMap" }
  var namingSource: (any Loadable)? { sources[0] }
}
