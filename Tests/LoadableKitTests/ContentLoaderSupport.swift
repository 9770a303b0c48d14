import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

typealias Loader = ContentLoader<Int, String, Int>

/// A keyed data source that a test finishes by hand, load by load.
///
/// Each call of ``load(_:)`` suspends until the test resolves or fails it. A cancelled load throws
/// `CancellationError` at once, unless the source ignores cancellation (then it waits for the
/// test like work that never checks). With `autoVersion`, loads return at once instead.
final class KeyedSource: Sendable {
  struct Stats: Sendable {
    /// Loads that called the source.
    var started = 0
    /// Loads that ended because their task was cancelled.
    var cancelled = 0
    /// Loads that returned a value.
    var resolved = 0
    /// Loads waiting for the test.
    var pending = 0
    var startedPerKey: [Int: Int] = [:]
  }

  private typealias Continuation = UnsafeContinuation<(value: String, version: Int), any Error>
  private typealias Ready = UnsafeContinuation<Void, Never>

  private struct Pending {
    var id: UInt64
    var key: Int
    var continuation: Continuation
  }

  private struct State {
    var stats = Stats()
    var nextID: UInt64 = 0
    var pending: [Pending] = []
    var cancelledEarly: Set<UInt64> = []
    typealias Waiter = (id: UInt64, condition: @Sendable (Stats) -> Bool, continuation: UnsafeContinuation<Void, Never>)
    var waiters: [Waiter] = []

    mutating func readyWaiters() -> [UnsafeContinuation<Void, Never>] {
      var ready: [UnsafeContinuation<Void, Never>] = []
      let stats = stats
      waiters.removeAll { waiter in
        guard waiter.condition(stats) else { return false }
        ready.append(waiter.continuation)
        return true
      }
      return ready
    }
  }

  private let state = Mutex(State())
  private let ignoresCancellation: Bool
  private let autoResolve: Bool

  init(ignoresCancellation: Bool = false, autoResolve: Bool = false) {
    self.ignoresCancellation = ignoresCancellation
    self.autoResolve = autoResolve
  }

  var stats: Stats { state.withLock(owner: self) { $0.stats } }

  /// Waits until `condition` holds for the source's counters; checked at every change, no polling.
  /// A cancelled wait (the test's time limit) records an issue and returns.
  func waitUntil(
    _ condition: @escaping @Sendable (Stats) -> Bool, sourceLocation: SourceLocation = #_sourceLocation
  ) async {
    let id = state.withLock(owner: self) { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        let ready = state.withLock(owner: self) { state -> Bool in
          if condition(state.stats) || Task.isCancelled { return true }
          state.waiters.append((id, condition, continuation))
          return false
        }
        if ready { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock(owner: self) { state -> UnsafeContinuation<Void, Never>? in
        guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return state.waiters.remove(at: index).continuation
      }
      waiter?.resume()
    }
    if Task.isCancelled { Issue.record("cancelled while waiting for the source", sourceLocation: sourceLocation) }
  }

  func waitForStarts(_ count: Int) async {
    await waitUntil { $0.started >= count }
  }

  /// Resolves the oldest (or newest) pending load of `key`. Returns `false` when there is none.
  @discardableResult
  func resolve(_ key: Int, _ value: String, version: Int, newest: Bool = false) -> Bool {
    finish(key, newest: newest, with: .success((value, version)))
  }

  @discardableResult
  func fail(_ key: Int, _ error: any Error, newest: Bool = false) -> Bool {
    finish(key, newest: newest, with: .failure(error))
  }

  private func finish(_ key: Int, newest: Bool, with result: Result<(value: String, version: Int), any Error>) -> Bool {
    let (pending, ready) = state.withLock(owner: self) { state -> (Pending?, [UnsafeContinuation<Void, Never>]) in
      let matches = state.pending.indices.filter { state.pending[$0].key == key }
      guard let index = newest ? matches.last : matches.first else { return (nil, []) }
      let pending = state.pending.remove(at: index)
      state.stats.pending -= 1
      if case .success = result { state.stats.resolved += 1 }
      return (pending, state.readyWaiters())
    }
    for waiter in ready { waiter.resume() }
    guard let pending else { return false }
    pending.continuation.resume(with: result)
    return true
  }

  /// The data source's load.
  func load(_ key: Int) async throws -> (value: String, version: Int) {
    await TestKit.delayStart()
    let id = state.withLock(owner: self) { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    if autoResolve {
      let ready = state.withLock(owner: self) { state -> [UnsafeContinuation<Void, Never>] in
        state.stats.started += 1
        state.stats.startedPerKey[key, default: 0] += 1
        state.stats.resolved += 1
        return state.readyWaiters()
      }
      for waiter in ready { waiter.resume() }
      return ("auto-\(key)-\(id)", Int(id))
    }
    let body = {
      try await withUnsafeThrowingContinuation { (continuation: Continuation) in
        let (cancelled, ready) = self.state.withLock(owner: self) { state -> (Bool, [Ready]) in
          state.stats.started += 1
          state.stats.startedPerKey[key, default: 0] += 1
          if state.cancelledEarly.remove(id) != nil {
            state.stats.cancelled += 1
            return (true, state.readyWaiters())
          }
          state.pending.append(Pending(id: id, key: key, continuation: continuation))
          state.stats.pending += 1
          return (false, state.readyWaiters())
        }
        for waiter in ready { waiter.resume() }
        if cancelled { continuation.resume(throwing: CancellationError()) }
      }
    }
    if ignoresCancellation { return try await body() }
    return try await withTaskCancellationHandler(operation: body) {
      let (pending, ready) = state.withLock(owner: self) { state -> (Pending?, [UnsafeContinuation<Void, Never>]) in
        guard let index = state.pending.firstIndex(where: { $0.id == id }) else {
          state.cancelledEarly.insert(id)
          return (nil, [])
        }
        state.stats.cancelled += 1
        state.stats.pending -= 1
        return (state.pending.remove(at: index), state.readyWaiters())
      }
      for waiter in ready { waiter.resume() }
      pending?.continuation.resume(throwing: CancellationError())
    }
  }
}

/// Reads an async sequence one element at a time, for exact expectations on what arrives.
struct Reader<Element: Sendable> {
  private var iterator: AsyncStream<Element>.Iterator

  init(_ stream: AsyncStream<Element>) {
    iterator = stream.makeAsyncIterator()
  }

  /// The next element's description, or `"end"` when the stream finished.
  mutating func next() async -> String {
    guard let element = await iterator.next() else { return "end" }
    return "\(element)"
  }

  /// The next `count` elements' descriptions.
  mutating func next(_ count: Int) async -> [String] {
    var result: [String] = []
    for _ in 0..<count { result.append(await next()) }
    return result
  }

  /// Skips elements until one whose description is `description`; returns the skipped ones.
  @discardableResult
  mutating func skip(until description: String) async -> [String] {
    var skipped: [String] = []
    while true {
      let element = await next()
      if element == description || element == "end" { return skipped }
      skipped.append(element)
    }
  }
}

/// A loader over `source` with test-friendly defaults: no idle timeout, a large idle count.
func makeLoader(
  _ source: KeyedSource,
  gracePeriod: Duration = .zero,
  idleTimeout: Duration? = nil,
  maximumIdleCount: Int = 1_000,
  clock: any Clock<Duration> = ContinuousClock(),
  prior: @escaping @Sendable (Int) -> (value: String, version: Int)? = { _ in nil }
) -> Loader {
  Loader(
    gracePeriod: gracePeriod, idleTimeout: idleTimeout, maximumIdleCount: maximumIdleCount, clock: clock,
    existingValue: prior, load: { try await source.load($0) })
}

/// Claims `key`, whose load is the only one `source` has pending then, resolves it with `value`
/// (version 1), and waits until the claim sees it loaded.
func claimLoaded(_ key: Int, _ value: String = "v1", in loader: Loader, from source: KeyedSource) async -> Loader.Claim {
  let claim = loader.begin(key)
  await source.waitUntil { $0.pending == 1 }
  source.resolve(key, value, version: 1)
  await eventually { claim.snapshot.status == .loaded }
  return claim
}
