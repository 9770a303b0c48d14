@testable import LoadableKit
import LoadableKitTesting
import Foundation
import Synchronization
import Testing

/// `ContentLoaderState` never releases a user value under the loader's lock. Its table of evicted
/// entries' slots (`evictedSlots`, 4f96412) keeps a copy of a key that outlives the key's evicted
/// entry (once the entry's abandoned work returned, the entry is freed and the table's copy is
/// the key's last); that copy is let go of with the effects, after the lock, when the key's next
/// entry takes the ticket and when the table is pruned. Each scenario runs in an exit test (as
/// `ReentrantDeinitTests` do): released under the lock, the key's deinit stops the process
/// ("Recursive call to lock Mutex"). Found by a second review (helper 33): both cases failed so on
/// 4f96412.
@Suite("ContentLoader: keys remembered for an evicted slot", .serialized, .timeLimit(.minutes(2)))
struct ContentLoaderEvictedSlotKeyTests {
  @Test(arguments: ["taken by the key's next entry", "pruned"])
  func aKeyRememberedForItsEvictedSlotIsReleasedAfterTheLoadersLock(_ path: String) async {
    await #expect(processExitsWith: .success) { [path] in
      await EvictedSlotKeyScenario.run(path)
    }
  }
}

enum EvictedSlotKeyScenario {
  typealias Keyed = ContentLoader<CallsBack, String, Int>

  static func run(_ path: String) async {
    do {
      try await body(path)
    } catch {
      print("\(path): \(error)")
      exit(3)
    }
  }

  private static func body(_ path: String) async throws {
    let loaders = WeakHolder<Keyed>()
    let released = Counter()
    let control = ControlledLoad<KeyedResult>(ignoresCancellation: true)
    // The loader's tasks run only when this thread runs them: the evicted entry's abandoned work
    // returns, and the entry is freed, here, before the next step.
    let executor = ManualTaskExecutor()
    let loader = Keyed(
      idleTimeout: nil, maximumIdleCount: 0, maximumConcurrentLoads: 1, taskExecutor: executor,
      load: { _ in try await control.operation() })
    loaders.set(loader)
    let makeKey: @Sendable (Int) -> CallsBack = { id in
      CallsBack(id) { [loaders] in
        _ = loaders.object?.count  // takes the loader's lock
        released.increment()
      }
    }
    // "pruned": with a limit of one the table is pruned when a third ticket is remembered; the
    // first two keys' work returned by then, so their tickets (and the copies of their keys) go.
    let ids = path == "pruned" ? [1, 2, 3] : [1]
    for id in ids {
      let entry = WeakHolder<Keyed.KeyedLoadable>()
      do {
        let key = makeKey(id)
        let claim = loader.begin(key)
        executor.runInOrder()
        guard control.startCount == id else {
          print("key \(id): its load did not start")
          exit(4)
        }
        entry.set(loader.withState { $0.index[key]! })
        claim.end()  // cancelled, idle and evicted at once: its work ignores the cancel and holds the slot
        executor.runInOrder()
      }
      guard loader.withState({ $0.evictedSlots[CallsBack(id) {}] }) != nil else {
        print("key \(id): no ticket remembered")
        exit(5)
      }
      _ = control.resolve(("abandoned", id))
      executor.runInOrder()
      // The evicted entry was freed with its work's task: the table's copy of the key is now the
      // key's last reference.
      guard entry.object == nil, loader.limiter?.takenCount == 0 else {
        print("key \(id): its evicted entry or its slot outlived its work")
        exit(6)
      }
      // Pruned when the third key was evicted, the first two keys' tickets (no longer held) went,
      // and with them the table's copies, the last of those keys: released after the lock.
      let letGo = path == "pruned" && id == 3 ? 2 : 0
      guard released.count == letGo else {
        print("key \(id): \(released.count) keys released, \(letGo) let go of by the loader")
        exit(7)
      }
    }
    if path != "pruned" {
      // The key's next entry takes the remembered ticket (not held any more): the table's copy
      // of the first key instance is dropped, under the loader's lock.
      let again = loader.begin(makeKey(1))
      executor.runInOrder()
      again.end()
      executor.runInOrder()
      guard released.count >= 1 else {
        print("the first key instance was never released")
        exit(8)
      }
    }
  }
}
