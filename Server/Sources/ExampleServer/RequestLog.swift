import ExampleServices
import Foundation

/// Every request the server received, with its outcome, so cancellation is visible from the
/// server's side: a client that goes away before the answer is logged as such.
///
/// It keeps the newest ``capacity`` entries, prints each finished one on standard output when
/// ``printsEntries`` is on, and tells ``changes()`` streams about every change.
public final class RequestLog: Sendable {
  /// How a request ended.
  public enum Outcome: Sendable, Hashable, CustomStringConvertible {
    /// Answered with `status` and a body of `bytes` bytes.
    case answered(status: Int, bytes: Int)
    /// The client closed the connection before the answer: nothing was sent.
    case clientWentAway
    /// The server closed the connection after `sent` of the body's `of` bytes (a staged fault).
    case cutOff(sent: Int, of: Int)

    public var description: String {
      switch self {
      case .answered(let status, let bytes): "\(status), \(bytes) bytes"
      case .clientWentAway: "client went away before the answer, nothing sent"
      case .cutOff(let sent, let total): "connection closed mid-body, \(sent) of \(total) bytes sent"
      }
    }
  }

  /// One request.
  public struct Entry: Sendable, Hashable, CustomStringConvertible {
    public var number: Int
    public var method: String
    /// The path and query.
    public var target: String
    /// Whether the request asked to be held (`X-Hold: true`).
    public var held = false
    /// `nil` while the request is in flight.
    public var outcome: Outcome?
    /// From the request's arrival to its outcome.
    public var duration: Duration?

    public var description: String {
      let milliseconds = duration.map { " in \($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) ms" } ?? ""
      return "#\(number) \(method) \(target)\(held ? " (held)" : "") → \(outcome.map { "\($0)" } ?? "in flight")\(milliseconds)"
    }
  }

  private struct State {
    var entries: [Entry] = []
    var count = 0
    var watchers: [Int: AsyncStream<[Entry]>.Continuation] = [:]
    var nextWatcher = 0
  }

  /// The most entries kept: older ones are dropped.
  public let capacity: Int
  /// Whether finished entries are printed on standard output.
  public let printsEntries: Bool
  private let state = Locked(State())

  public init(capacity: Int = 10_000, printsEntries: Bool = false) {
    self.capacity = max(1, capacity)
    self.printsEntries = printsEntries
  }

  /// The entries kept, oldest first.
  public var entries: [Entry] { state.withLock { $0.entries } }

  /// A stream of the entries, now and after every change (the newest snapshot only).
  public func changes() -> AsyncStream<[Entry]> {
    let (stream, continuation) = AsyncStream.makeStream(of: [Entry].self, bufferingPolicy: .bufferingNewest(1))
    let (id, entries) = state.withLock { state in
      state.nextWatcher += 1
      state.watchers[state.nextWatcher] = continuation
      return (state.nextWatcher, state.entries)
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
    }
    continuation.yield(entries)
    return stream
  }

  /// Waits until `predicate` holds for the entries, and returns them.
  public func wait(until predicate: ([Entry]) -> Bool) async -> [Entry] {
    for await entries in changes() where predicate(entries) { return entries }
    return entries
  }

  func begin(method: String, target: String, held: Bool = false) -> Int {
    update { state in
      state.count += 1
      state.entries.append(Entry(number: state.count, method: method, target: target, held: held))
      if state.entries.count > capacity { state.entries.removeFirst(state.entries.count - capacity) }
      return state.count
    }
  }

  func end(_ number: Int, _ outcome: Outcome, after duration: Duration) {
    let entry = update { state -> Entry? in
      guard let index = state.entries.lastIndex(where: { $0.number == number }) else { return nil }
      state.entries[index].outcome = outcome
      state.entries[index].duration = duration
      return state.entries[index]
    }
    if printsEntries, let entry {
      FileHandle.standardOutput.write(Data("\(entry)\n".utf8))
    }
  }

  private func update<R>(_ body: (inout State) -> R) -> R {
    let (result, entries, watchers) = state.withLock { state in
      (body(&state), state.entries, Array(state.watchers.values))
    }
    for watcher in watchers { watcher.yield(entries) }
    return result
  }
}
