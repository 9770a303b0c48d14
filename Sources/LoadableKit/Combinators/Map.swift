extension AsyncLoadable {
  /// A loadable whose content is `transform` applied to this loadable's content.
  ///
  /// Nothing loads until the result is loaded; then it loads this loadable with the same intent
  /// (a retry retries it, a refresh refreshes it) and applies `transform`. When this loadable
  /// already has its content, the result is loaded at once. It is a live view: while loaded, it
  /// recomputes whenever this loadable's content changes, and fails with the error if `transform`
  /// throws.
  ///
  /// ```swift
  /// let user: AsyncLoadable<Models.User> = api.user(id).map { Models.User(apiModel: $0) }
  /// ```
  ///
  /// - Parameter transform: a function of the content; its error fails the result.
  /// - Returns: a derived loadable that depends on this one (a required dependency).
  @inlinable
  public func map<T: Sendable>(_ transform: @escaping @Sendable (Content) throws -> T) -> AsyncLoadable<T> {
    // Inlined into the caller, where `Content` and `T` are known: the boxes are read and made in
    // code specialized for them, not in the library's generic code, and the loadable's class is
    // named there too (its metadata is static, not looked up at run time: see `MappedLoadable`).
    MappedLoadable<Content, T>(source: self) { box in ContentBox(try transform(ContentBox<Content>.unbox(box))) }
  }

  /// A loadable whose content is the asynchronous `transform` applied to this loadable's content.
  ///
  /// Like ``map(_:)``, but the transform may suspend, so it runs only as part of an attempt: the
  /// result is never loaded at once, and when this loadable's content changes it becomes stale
  /// (``needsSync`` is `true`) until it loads again.
  public func asyncMap<T: Sendable>(_ transform: @escaping @Sendable (Content) async throws -> T) -> AsyncLoadable<T> {
    AsyncMappedLoadable(source: self, transform: transform)
  }
}

/// A `map`'s loadable.
///
/// Its transform takes the source's ``ContentBox`` and returns its own: ``AsyncLoadable/map(_:)``
/// is inlined into its caller and wraps the caller's transform there, where both content types
/// are known. The library's generic code, unspecialized for a content type another module chose,
/// would look up the metadata of `ContentBox<Source>` and `ContentBox<Content>` at run time, about
/// 650 instructions a load, more than a third of what is left of a `map` node's own work. It is
/// created there too: created in the library, its own class's metadata was looked up at run time
/// (some 380 instructions a node).
@usableFromInline
final class MappedLoadable<Source: Sendable, Content: Sendable>: CombinedLoadable<Content>, @unchecked Sendable {
  let transform: @Sendable (AnyContentBox) throws -> AnyContentBox

  @usableFromInline
  init(source: AsyncLoadable<Source>, transform: @escaping @Sendable (AnyContentBox) throws -> AnyContentBox) {
    self.transform = transform
    super.init(sources: [source])
    startLiveView()
  }

  override func combine(_ values: [AnyContentBox]) throws -> Content {
    ContentBox<Content>.unbox(try transform(values[0]))
  }

  override func combineBoxed(_ values: [AnyContentBox]) throws -> AnyContentBox {
    try transform(values[0])
  }

  /// The one delivery read as it is, without the array of values the general case builds.
  override func combineBoxed(deliveries: DependencyGroup.Deliveries) throws -> AnyContentBox {
    guard let value = deliveries[0].contentBox else { throw LoadableError.noContent }
    return try transform(value)
  }
}

extension MappedLoadable: CombinatorNaming {
  var combinatorName: String { "map" }
  var namingSource: (any Loadable)? { sources[0] }
}

extension AsyncMappedLoadable: CombinatorNaming {
  var combinatorName: String { "asyncMap" }
  var namingSource: (any Loadable)? { sources[0] }
}

final class AsyncMappedLoadable<Source: Sendable, Content: Sendable>: DerivedLoadable<Content>, @unchecked Sendable {
  let transform: @Sendable (Source) async throws -> Content

  init(source: AsyncLoadable<Source>, transform: @escaping @Sendable (Source) async throws -> Content) {
    self.transform = transform
    super.init(sources: [source])
  }

  override func performLoad() async throws -> Content {
    let (values, versions) = try await loadSources()
    let content = try await transform(ContentBox<Source>.unbox(values[0]))
    recordDerivation(sources: versions)
    return content
  }
}
