import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Synchronization
import Testing

// Issue 25, "A suite that fails when a promise breaks": the promises whose breaking stops the
// process. A value released under a loadable's lock runs its `deinit` there; a `deinit` that calls
// back into the loadable takes the lock again and stops the process with "Recursive call to lock
// Mutex", so each scenario runs in an exit test.

/// Calls `action` when it is deallocated.
final class PromiseReleaseProbe: Sendable {
  let action: @Sendable () -> Void
  init(_ action: @escaping @Sendable () -> Void) { self.action = action }
  deinit { action() }
}

/// The ways a user's value given to a loadable as a setting is replaced.
enum PromiseSettingReplacement: String, Codable, Sendable, CaseIterable {
  /// `loadOptions` set again: the old options' closures (a retry policy's) go.
  case loadOptionsReplaced
  /// `loadOptions` set again after a `name`: the settings object that held both is replaced.
  case loadOptionsReplacedAfterAName

  /// Runs the scenario; the process stops if the replaced value is released under the lock.
  func run() {
    let loadable = AsyncLoadable<Int> { 1 }
    let released = Counter()
    if self == .loadOptionsReplacedAfterAName { loadable.name = "portal" }
    do {
      // The probe reads the loadable when it goes: under the lock, that read would trap.
      let probe = PromiseReleaseProbe { [weak loadable] in
        _ = loadable?.loadStatus
        _ = loadable?.loadOptions
        released.increment()
      }
      loadable.loadOptions = LoadOptions(
        retryPolicy: RetryPolicy(maxAttempts: 2, shouldRetry: { [probe] _ in
          _ = probe
          return true
        }))
    }
    guard released.count == 0 else {
      print("\(self): the probe went before the options were replaced")
      exit(2)
    }
    loadable.loadOptions = LoadOptions()  // the only reference to the probe goes here
    guard released.count == 1 else {
      print("\(self): the replaced options were not released (\(released.count))")
      exit(3)
    }
    guard loadable.loadOptions.retryPolicy == nil, self != .loadOptionsReplacedAfterAName || loadable.name == "portal"
    else {
      print("\(self): the new settings were not kept")
      exit(4)
    }
  }
}

@Suite("Promises: replaced settings are released after the lock", .serialized, .timeLimit(.minutes(1)))
struct PromiseExitTests {
  /// A `LoadOptions` holding closures, replaced on a loadable: the closures it held are released
  /// after the loadable's lock, so their captures' `deinit` may call back into the loadable.
  @Test(arguments: PromiseSettingReplacement.allCases)
  func replacedLoadOptionsAreReleasedAfterTheLock(_ replacement: PromiseSettingReplacement) async {
    await #expect(processExitsWith: .success) { [replacement] in
      replacement.run()
    }
  }
}
