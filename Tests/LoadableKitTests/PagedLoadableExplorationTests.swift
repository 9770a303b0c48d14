@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

/// A paged source for the schedule explorer: a refresh starts a new *epoch* (the source changed);
/// page `k` of epoch `e` has the cursor and the one item `e * 100 + k`, and the last page is 4. It
/// yields a seeded number of times, and fails the first request for one chosen page.
final class EpochSource: Sendable {
  let epoch = Atomic<Int>(1)
  let yields: Int
  let failingPage: Int?
  let failed = Atomic<Bool>(false)

  init(yields: Int, failingPage: Int?) {
    self.yields = yields
    self.failingPage = failingPage
  }

  func load(_ cursor: Int?) async throws -> Page<Int, Int> {
    let current = cursor ?? (epoch.load(ordering: .relaxed) * 100)
    for _ in 0..<yields { await Task.yield() }
    try Task.checkCancellation()
    let k = current % 100
    if k == failingPage, failed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
      throw Boom(code: k)
    }
    return Page(items: [current], nextCursor: k < 4 ? current + 1 : nil)
  }
}

@Suite("PagedLoadable schedule exploration", .timeLimit(.minutes(5)))
struct PagedLoadableExplorationTests {
  /// Next-page callers, a retry, a cancel of the next page, a refresh and a previous page, in
  /// seeded interleavings: every call returns once, nothing is left loading or waiting, and the
  /// pages held are always one epoch's contiguous run within the bound.
  @Test func pageLoadsRefreshAndCancelInAnyOrder() {
    explore(0..<1_000) { executor, generator in
      let source = EpochSource(
        yields: Int.random(in: 0...2, using: &generator),
        failingPage: Bool.random(using: &generator) ? Int.random(in: 1...3, using: &generator) : nil)
      let bound = Bool.random(using: &generator) ? 2 : nil
      let paged = PagedLoadable<Int, Int>(maximumPages: bound) { try await source.load($0) }
      let calls = Calls(expected: 8)
      executor.spawn { await calls.record(0) { try await paged.load() } }
      for call in 1...4 {
        let delay = Int.random(in: 0...12, using: &generator)
        let kind = Int.random(in: 0...3, using: &generator)
        executor.spawn {
          await yields(delay)
          await calls.record(call) {
            switch kind {
            case 0: try await paged.retryNextPage()
            case 1: try await paged.loadPreviousPage()
            default: try await paged.loadNextPage()
            }
          }
        }
      }
      let cancelDelay = Int.random(in: 0...12, using: &generator)
      executor.spawn {
        await yields(cancelDelay)
        paged.cancelNextPage()
        calls.record(5, "ok")
      }
      let refreshDelay = Int.random(in: 0...16, using: &generator)
      executor.spawn {
        await yields(refreshDelay)
        // The source changes, and the app refreshes. (Not while the first page loads: that load
        // may have read the source before the change, and `sync()` would join it.)
        if paged.loadStatus != .loading {
          source.epoch.add(1, ordering: .relaxed)
          paged.sync()
        }
        calls.record(6, "ok")
      }
      let lateDelay = Int.random(in: 8...20, using: &generator)
      executor.spawn {
        await yields(lateDelay)
        await calls.record(7) { try await paged.retryNextPage() }
      }
      return {
        var problems = calls.violations
        let outcomes = calls.all.values.flatMap { $0 }
        if let odd = outcomes.first(where: { $0 != "ok" && $0 != "cancelled" && !$0.hasPrefix("Boom") }) {
          problems.append("unexpected outcome \(odd)")
        }
        if paged.loadStatus == .loading { problems.append("the first page still loading") }
        if paged.nextPageStatus == .loading { problems.append("a next page still loading") }
        if paged.previousPageStatus == .loading { problems.append("a previous page still loading") }
        if paged.waiterCount != 0 { problems.append("waiters left on the first page") }
        for direction in [PageDirection.next, .previous] where (paged.pageLoadable(toward: direction)?.waiterCount ?? 0) != 0 {
          problems.append("waiters left on a page load")
        }
        if let content = paged.content {
          let items = content.items
          if let first = items.first {
            let epoch = first / 100
            let expected = Array(first..<(first + items.count))
            if items != expected || items.contains(where: { $0 / 100 != epoch }) {
              problems.append("pages not contiguous: \(items)")
            }
            if first % 100 != content.droppedPageCount { problems.append("\(content.droppedPageCount) dropped before \(first)") }
          }
          if let bound, content.pages.count > bound { problems.append("\(content.pages.count) pages held") }
        }
        return problems
      }
    }
  }
}
