/// A loadable of the contents of several loadables, loaded concurrently.
///
/// Loading the result loads every element with the same intent, at the same time. It fails fast:
/// the first failure fails the result with that error and cancels the elements' attempts that the
/// zip started and that nobody else wants (they go back to their state before the attempt). Like
/// ``AsyncLoadable/map(_:)``, the result is loaded at once when every element is, and it is a live
/// view of its elements' contents; `zip(a)` behaves like `a.map { $0 }`.
///
/// ```swift
/// let basemapAndLayers = zip(basemap, parks, trails)   // AsyncLoadable<(Basemap, Layer, Layer)>
/// let (base, parksInfo, trailsInfo) = try await basemapAndLayers.fetch()
/// ```
@inlinable
public func zip<each T: Sendable>(_ loadables: repeat AsyncLoadable<each T>) -> AsyncLoadable<(repeat each T)> {
  // Inlined into the caller, where the element types are known, as `map` is: the contents are
  // unboxed and the tuple boxed there, in code specialized for them. The library's generic code
  // looked up the metadata of each element's box and of the tuple at run time, five look-ups a
  // `zip` of two loaded (a layer of a map's graph).
  ZipLoadable<repeat each T>(repeat each loadables) { boxes in
    var index = -1
    func nextBox() -> AnyContentBox {
      index += 1
      return boxes[index]
    }
    return ContentBox((repeat ContentBox<each T>.unbox(nextBox())))
  }
}

/// A loadable of the contents of `loadables`, in order, loaded concurrently.
///
/// The homogeneous form of the variadic `zip`: same rules, any number of
/// elements. An empty array gives a loadable of `[]`.
///
/// - Complexity: loading is O(*n*) in the number of elements.
public func zip<T: Sendable>(_ loadables: [AsyncLoadable<T>]) -> AsyncLoadable<[T]> {
  // Each element wrapped where its type is known: passed as it is, the array was converted by
  // the runtime's dynamic cast, which checked each element's conformance (some 850 instructions
  // an input).
  ArrayZipLoadable<T>(sources: loadables.map { $0 as any DependencyNode })
}

/// A variadic `zip`'s loadable: its function of the elements' boxes was made where `zip` was
/// called (the variadic `zip`, inlined into its caller).
@usableFromInline
final class ZipLoadable<each T: Sendable>: CombinedLoadable<(repeat each T)>, @unchecked Sendable {
  let combineBoxes: @Sendable ([AnyContentBox]) -> AnyContentBox

  @usableFromInline
  init(_ loadables: repeat AsyncLoadable<each T>, combine: @escaping @Sendable ([AnyContentBox]) -> AnyContentBox) {
    combineBoxes = combine
    var sources: [any DependencyNode] = []
    for loadable in repeat each loadables {
      sources.append(loadable)
    }
    super.init(sources: sources)
    startLiveView()
  }

  override func combine(_ values: [AnyContentBox]) throws -> (repeat each T) {
    ContentBox<(repeat each T)>.unbox(combineBoxes(values))
  }

  override func combineBoxed(_ values: [AnyContentBox]) throws -> AnyContentBox {
    combineBoxes(values)
  }
}

final class ArrayZipLoadable<T: Sendable>: CombinedLoadable<[T]>, @unchecked Sendable {
  override init(sources: [any DependencyNode]) {
    super.init(sources: sources)
    startLiveView()
  }

  /// A loop, not `values.map(ContentBox<T>.unbox)`: the closure looked up `ContentBox<T>`'s
  /// metadata for every element (some 330 instructions an input); here it is looked up once.
  override func combine(_ values: [AnyContentBox]) throws -> [T] {
    var contents: [T] = []
    contents.reserveCapacity(values.count)
    for value in values { contents.append(ContentBox<T>.unbox(value)) }
    return contents
  }
}

extension ZipLoadable: CombinatorNaming {
  var combinatorName: String { "zip(\(sources.count))" }
  var namingSource: (any Loadable)? { nil }
}

extension ArrayZipLoadable: CombinatorNaming {
  var combinatorName: String { "zip(\(sources.count))" }
  var namingSource: (any Loadable)? { nil }
}
