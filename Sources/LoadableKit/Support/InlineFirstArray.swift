/// An array whose first element is stored inline and the others in an `Array`: the lists of one
/// attempt's dependencies often hold one element — a `map`'s one delivery, a group's one wait
/// when its other nodes answered at once, the one version a view derived from — and so does a
/// key's table of versions after its first load; an `Array` of one is an allocation.
///
/// The members a key's version table uses are usable from inlinable code (that table is:
/// ``ContentLoader/makeEntry(_:)``), its storage among them: named apart from `Collection.first`,
/// and written only here.
@usableFromInline
struct InlineFirstArray<Element>: RandomAccessCollection, MutableCollection {
  @usableFromInline var head: Element?
  @usableFromInline var tail: [Element] = []

  @inlinable init() {}

  init(_ elements: some Sequence<Element>) {
    for element in elements { append(element) }
  }

  init(repeating element: Element, count: Int) {
    guard count > 0 else { return }
    head = element
    if count > 1 { tail = Array(repeating: element, count: count - 1) }
  }

  @inlinable var startIndex: Int { 0 }
  @inlinable var endIndex: Int { head == nil ? 0 : 1 + tail.count }

  @inlinable @inline(__always)
  subscript(index: Int) -> Element {
    get { index == 0 ? head! : tail[index - 1] }
    set {
      if index == 0 {
        precondition(head != nil, "index out of range")
        head = newValue
      } else {
        tail[index - 1] = newValue
      }
    }
  }

  @inlinable
  mutating func append(_ element: Element) {
    if head == nil { head = element } else { tail.append(element) }
  }

  /// Sets the element at each index to `value(index)`, in order. The array of the others is made
  /// unique only when there are others: a loop through the subscript made it unique before it
  /// began, and the shared empty array is never unique (a call to copy it, each time: ~80
  /// instructions of a `map` node's load).
  mutating func update(_ value: (Int) -> Element) {
    guard head != nil else { return }
    head = value(0)
    guard !tail.isEmpty else { return }
    for index in tail.indices { tail[index] = value(index + 1) }
  }

  mutating func reserveCapacity(_ capacity: Int) {
    if capacity > 1 { tail.reserveCapacity(capacity - 1) }
  }

  /// Removes the elements `shouldBeRemoved` picks (asked of each, in order), keeping the others
  /// in order.
  @inlinable
  mutating func removeAll(where shouldBeRemoved: (Element) throws -> Bool) rethrows {
    guard let first = head else { return }
    let removesHead = try shouldBeRemoved(first)
    try tail.removeAll(where: shouldBeRemoved)
    if removesHead { head = tail.isEmpty ? nil : tail.removeFirst() }
  }
}

extension InlineFirstArray: Sendable where Element: Sendable {}
