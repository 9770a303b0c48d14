/// An array whose first element is stored inline and the others in an `Array`: the lists of one
/// attempt's dependencies often hold one element — a `map`'s one delivery, a group's one wait
/// when its other nodes answered at once, the one version a view derived from — and an `Array`
/// of one is an allocation.
struct InlineFirstArray<Element>: RandomAccessCollection, MutableCollection {
  private var first: Element?
  private var rest: [Element] = []

  init() {}

  init(_ elements: some Sequence<Element>) {
    for element in elements { append(element) }
  }

  init(repeating element: Element, count: Int) {
    guard count > 0 else { return }
    first = element
    if count > 1 { rest = Array(repeating: element, count: count - 1) }
  }

  var startIndex: Int { 0 }
  var endIndex: Int { first == nil ? 0 : 1 + rest.count }

  @inline(__always)
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

  mutating func append(_ element: Element) {
    if first == nil { first = element } else { rest.append(element) }
  }

  mutating func reserveCapacity(_ capacity: Int) {
    if capacity > 1 { rest.reserveCapacity(capacity - 1) }
  }
}

extension InlineFirstArray: Sendable where Element: Sendable {}
