extension AsyncLoadable {
  /// Creates a named loadable whose attempts run `operation`.
  ///
  /// The name is the loadable's ``displayName``: the dependency tree, instruments and error
  /// messages such as ``LoadableError/dependencyCycle``'s use it.
  ///
  /// ```swift
  /// let portal = AsyncLoadable(name: "portal") { try await service.portalInfo() }
  /// ```
  @inlinable
  public convenience init(name: String, _ operation: @escaping @Sendable () async throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .async(operation))
    self.name = name
  }

  /// Creates a named loadable whose attempts run the synchronous `operation`.
  @inlinable @_disfavoredOverload
  public convenience init(name: String, _ operation: @escaping @Sendable () throws -> Content) {
    self.init(.notLoaded, content: nil, operation: .sync(operation))
    self.name = name
  }

  /// Creates a named loadable that is already ``LoadStatus/loaded`` with `content`.
  @inlinable @_disfavoredOverload
  public convenience init(name: String, content: Content) {
    self.init(.loaded, content: nil, operation: .constant(ContentBox(content)))
    self.name = name
  }

  /// The name every loadable has, for people reading a dependency tree, a trace or an error.
  ///
  /// It is the ``name`` given at creation or with ``named(_:)``; otherwise, for a loadable made by a
  /// combinator, a name derived from the combinator and its source — `map(portal)`,
  /// `flatMap(map(items))`, `zip(3)`; for a ``ContentLoader`` key's loadable, the loader's name and
  /// the key — `thumbnails[42]`; otherwise the type's name, which for a subclass is the
  /// subclass's (`FeatureTable`). A derived name nests at most three combinators deep
  /// (`map(map(map(…)))`), so it stays short however long the chain is.
  public var displayName: String {
    if let name { return name }
    if let derived = LoadableNames.derivedName(of: self) { return derived }
    if let contextual = (self as? any ContextualNaming)?.contextualName { return contextual }
    return LoadableNames.typeName(of: self)
  }
}

/// A loadable made by a combinator: its name derives from the combinator and its source.
protocol CombinatorNaming: AnyObject {
  /// The combinator: `map`, `asyncMap`, `flatMap`, `joined`, `zip(3)`.
  var combinatorName: String { get }
  /// The loadable whose name goes inside the parentheses, if there is one.
  var namingSource: (any Loadable)? { get }
}

enum LoadableNames {
  /// How many combinators a derived name nests before it elides the rest.
  static let maximumNesting = 3

  /// The ``AsyncLoadable/displayName`` of an `AsyncLoadable`, the type name of anything else.
  static func name(of object: AnyObject) -> String {
    if let named = object as? any DisplayNamed { return named.displayName }
    return typeName(of: object)
  }

  /// The unqualified name of the object's dynamic type, such as `FeatureTable` or `AsyncLoadable<Int>`.
  static func typeName(of object: AnyObject) -> String {
    String(describing: type(of: object))
  }

  /// `map(portal)` for a combinator's result, walking the chain of sources iteratively and at
  /// most ``maximumNesting`` deep; `nil` for a loadable that no combinator made.
  static func derivedName(of object: AnyObject) -> String? {
    guard var current = object as? any CombinatorNaming else { return nil }
    var combinators: [String] = []
    var innermost: String?
    while true {
      combinators.append(current.combinatorName)
      guard let source = current.namingSource else { break }
      if let name = (source as? any DisplayNamed)?.explicitName {
        innermost = name
      } else if let next = source as? any CombinatorNaming {
        if combinators.count < maximumNesting {
          current = next
          continue
        }
        innermost = "…"
      } else {
        innermost = typeName(of: source)
      }
      break
    }
    var text = innermost.map { combinators.removeLast() + "(" + $0 + ")" } ?? combinators.removeLast()
    for combinator in combinators.reversed() { text = combinator + "(" + text + ")" }
    return text
  }
}

/// What naming needs of an ``AsyncLoadable`` whose content type it cannot name.
protocol DisplayNamed: AnyObject {
  var displayName: String { get }
  var explicitName: String? { get }
}

extension AsyncLoadable: DisplayNamed {
  var explicitName: String? { name }
}

/// A loadable whose name comes from where it lives rather than from a combinator: a
/// ``ContentLoader`` key's loadable is `loaderName[key]`.
protocol ContextualNaming: AnyObject {
  var contextualName: String { get }
}

extension ContentLoader.KeyedLoadable: ContextualNaming {
  var contextualName: String { "\(loader?.name ?? "ContentLoader")[\(key)]" }
}
