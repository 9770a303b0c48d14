import LoadableKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a wait of the test kit throws when its deadline passes before the thing it waits for
/// happens: a lost waiter fails its test with a message that says what was still waiting,
/// instead of hanging the run.
public struct TestKitTimeout: Error, CustomStringConvertible, Sendable {
  /// What was still waiting, and the state it saw last.
  public var description: String

  public init(_ description: String) { self.description = description }
}

/// The test kit's defaults.
public enum TestKit {
  /// How long, in real time, a wait of the test kit (``TestClock/waitForSleepers(_:timeout:)``,
  /// ``ControlledLoad/waitForStart(_:timeout:)``) lasts before it throws ``TestKitTimeout``.
  ///
  /// A bound on a lost waiter, not a way to wait for something: a wait that the code under test
  /// satisfies returns as soon as it does.
  public static let defaultTimeout: Duration = .seconds(30)

  /// How many times each ``ControlledLoad`` attempt yields before it reaches the test: the value
  /// of the environment variable `LOADABLEKIT_TEST_START_DELAY`, or 0.
  ///
  /// A test that resolves a load, or counts the loads started, before it waits for the load to
  /// start (``ControlledLoad/waitForStart(_:timeout:)``) passes whenever the load gets there
  /// first, which it usually does: the test fails now and then, on a slow machine. With a delay,
  /// the load gets there last, and such a test fails every time. A test's own data source can
  /// call ``delayStart()`` for the same. (`.ci/run` runs the suite once with a delay of 3,000.)
  public static let startDelay: Int = max(0, getenv("LOADABLEKIT_TEST_START_DELAY").flatMap { Int(String(cString: $0)) } ?? 0)

  /// Yields ``startDelay`` times: what a controlled load does before it reaches the test.
  public static func delayStart() async {
    for _ in 0..<startDelay { await Task.yield() }
  }
}

/// One suspended wait of the test kit: a continuation ended exactly once, by whichever comes
/// first of the event it waits for (its owner takes it out of its state and resumes it), the
/// waiting task's cancellation, or a real-time deadline.
///
/// The owner keeps the continuation in its own locked state; `withdraw` takes it out of that
/// state under the owner's lock, so that only one of the three ends can resume it.
///
/// - Parameters:
///   - timeout: the real-time deadline.
///   - register: called once, synchronously: returns `true` when the condition already holds
///     (the continuation is then resumed at once and must not be stored), or stores the
///     continuation under the given identifier and returns `false`.
///   - withdraw: takes the continuation with that identifier out of the owner's state, if it is
///     still there.
///   - describe: what was waited for and what the state is now, for the timeout's message.
/// - Throws: `CancellationError` when the waiting task is cancelled, ``TestKitTimeout`` when the
///   deadline passes first.
func boundedWait(
  timeout: Duration,
  register: (UInt64, UnsafeContinuation<Void, any Error>) -> Bool,
  withdraw: @escaping @Sendable (UInt64) -> UnsafeContinuation<Void, any Error>?,
  describe: @escaping @Sendable () -> String
) async throws {
  let id = waitIdentifiers.wrappingAdd(1, ordering: .relaxed).newValue
  let deadline = Task {
    do { try await Task.sleep(for: timeout) } catch { return }
    withdraw(id)?.handOff(throwing: TestKitTimeout("\(describe()): still waiting after \(timeout)"))
  }
  defer { deadline.cancel() }
  try await withTaskCancellationHandler {
    defer { ContinuationHandoff.awaited() }
    return try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
      if register(id, continuation) {
        continuation.resume()
      } else if Task.isCancelled {
        // Cancelled before the continuation was stored: the handler found nothing to withdraw.
        withdraw(id)?.handOff(throwing: CancellationError())
      }
    }
  } onCancel: {
    withdraw(id)?.handOff(throwing: CancellationError())
  }
}

private let waitIdentifiers = Atomic<UInt64>(0)

/// Waits stored in an owner's locked state, each until a count reaches a number.
struct CountWaits: Sendable {
  private var entries: [(id: UInt64, count: Int, continuation: UnsafeContinuation<Void, any Error>)] = []

  mutating func add(_ id: UInt64, until count: Int, _ continuation: UnsafeContinuation<Void, any Error>) {
    entries.append((id, count, continuation))
  }

  mutating func withdraw(_ id: UInt64) -> UnsafeContinuation<Void, any Error>? {
    guard let index = entries.firstIndex(where: { $0.id == id }) else { return nil }
    return entries.remove(at: index).continuation
  }

  /// Takes out the waits satisfied by `count`; resume them after the lock.
  mutating func takeSatisfied(by count: Int) -> [UnsafeContinuation<Void, any Error>] {
    var ready: [UnsafeContinuation<Void, any Error>] = []
    entries.removeAll { entry in
      guard count >= entry.count else { return false }
      ready.append(entry.continuation)
      return true
    }
    return ready
  }
}
