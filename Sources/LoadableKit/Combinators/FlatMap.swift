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
  @inlinable
  public func flatMap<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<T> {
    // Inlined into the caller, as `map` is: the source's content is unboxed there, in code
    // specialized for it, and the inner loadable's content box is the result's as it is.
    FlatMappedLoadable<Content, T, T>(source: self) { box in
      (try transform(ContentBox<Content>.unbox(box)), nil)
    }
  }

  /// Like ``flatMap(_:)``, but keeps this loadable's content next to the inner one's.
  ///
  /// ```swift
  /// let itemAndPortal: AsyncLoadable<(PortalItem, Portal)> = item.joined { Portal(url: $0.portalURL) }
  /// ```
  @inlinable
  public func joined<T: Sendable>(
    _ transform: @escaping @Sendable (Content) throws -> AsyncLoadable<T>
  ) -> AsyncLoadable<(Content, T)> {
    FlatMappedLoadable<Content, T, (Content, T)>(source: self, joins: true) { box in
      let content = ContentBox<Content>.unbox(box)
      return (try transform(content), { inner in ContentBox((content, ContentBox<T>.unbox(inner))) })
    }
  }
}

/// A `flatMap`'s (or `joined`'s) loadable.
///
/// Its step takes the source's ``ContentBox`` and returns the inner loadable and, for `joined`,
/// the function that makes the result's box from the inner content's (`nil`: the inner content's
/// box is the result's). Both are made where `flatMap` was called, specialized for its types: the
/// library's generic code looked up the metadata of three boxes and an optional at run time, an
/// attempt (a portal item of a map's graph).
@usableFromInline
final class FlatMappedLoadable<Source: Sendable, Inner: Sendable, Content: Sendable>: DerivedLoadable<Content>,
  @unchecked Sendable
{
  @usableFromInline
  typealias Step = @Sendable (AnyContentBox) throws -> (
    inner: AsyncLoadable<Inner>, finish: (@Sendable (AnyContentBox) -> AnyContentBox)?
  )
  let step: Step
  /// Made by `joined` rather than `flatMap` (for its name).
  let joins: Bool

  @usableFromInline
  init(source: AsyncLoadable<Source>, joins: Bool = false, step: @escaping Step) {
    self.step = step
    self.joins = joins
    super.init(sources: [source])
  }

  override func performLoad() async throws -> Content {
    ContentBox<Content>.unbox(try await performLoadBoxed())
  }

  nonisolated(nonsending) override func performLoadBoxed() async throws -> AnyContentBox {
    let (values, versions) = try await loadSources()
    let (inner, finish) = try step(values[0])
    let (box, innerVersion) = try await loadInner(inner)
    recordDerivation(sources: versions, inner: (inner, innerVersion))
    return finish.map { $0(box) } ?? box
  }
}

extension FlatMappedLoadable: CombinatorNaming {
  var combinatorName: String { joins ? "joined" : "flatMap" }
  var namingSource: (any Loadable)? { sources[0] }
}
