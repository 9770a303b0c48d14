/// An array whose first element is stored inline and the others in an `Array`: the lists of one
/// attempt's dependencies often hold one element — a `map`'s one delivery, a group's one wait
/// when its other nodes answered at once, the one version a view derived from — and so does a
/// key's table of versions after its first load; an `Array` of one is an allocation.
///
/// Usable from inlinable code (a key's version table is: ``ContentLoader/makeEntry(_:)``).
@usableFromInline
struct InlineFirstArray<Element>: RandomAccessCollection, MutableCollection {
  @usableFromInline var first: Element?
  @usableFromInline var rest: [Element] = []

  @inlinable init() {}

  init(_ elements: some Sequence<Element>) {
    for element in elements { append(element) }
  }

  init(repeating element: Element, count: Int) {
    guard count > 0 else { return }
    first = element
    if count > 1 { rest = Array(repeating: element, count: count - 1) }
  }

  @inlinable var startIndex: Int { 0 }
  @inlinable var endIndex: Int { first == nil ? 0 : 1 + rest.count }

  @inlinable @inline(__always)
  subscript(index: Int) -> Element {
    get { index == 0 ? first! : rest[index - 1] }
    set {
      if index == 0 {
        precondition(first != nil, "index out of range")
        first = newValue
      } else {
        rest[index - 1] = newValue
      }
    }
  }

  @inlinable
  mutating func append(_ element: Element) {
    if first == nil { first = element } else { rest.append(element) }
  }

  mutating func reserveCapacity(_ capacity: Int) {
    if capacity > 1 { rest.reserveCapacity(capacity - 1) }
  }

  /// Removes the elements `shouldBeRemoved` picks (asked of each, in order), keeping the others
  /// in order.
  @inlinable
  mutating func removeAll(where shouldBeRemoved: (Element) throws -> Bool) rethrows {
    guard let head = first else { return }
    let removesHead = try shouldBeRemoved(head)
    try rest.removeAll(where: shouldBeRemoved)
    if removesHead { first = rest.isEmpty ? nil : rest.removeFirst() }
  }
}

extension InlineFirstArray: Sendable where Element: Sendable {}
