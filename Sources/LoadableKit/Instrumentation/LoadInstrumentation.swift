import Synchronization

/// Where an app installs the ``LoadInstrument`` that hears about every loadable in the process.
///
/// ```swift
/// LoadInstrumentation.processWide = TracingInstrument()   // from the Integrations package
/// ```
///
/// A loadable can have its own instrument too (``AsyncLoadable/instrument``); it hears about that
/// loadable's attempts before the process-wide one does.
///
/// Until an instrument is installed, the paths that report cost one atomic load each and allocate
/// nothing. Removing the process-wide instrument brings that back, unless a loadable was given its
/// own instrument at some point: from then on the start of each attempt also reads that
/// loadable's settings.
public enum LoadInstrumentation {
  /// Whether an instrument may be installed anywhere: the one atomic load on the reporting paths.
  @usableFromInline static let mayReport = Atomic<Bool>(false)
  /// Set once a loadable was given its own instrument.
  static let perObjectInstalled = Atomic<Bool>(false)
  private static let installed = Mutex<(any LoadInstrument)?>(nil)
  private static let lockOwner = LockOwner()
  private final class LockOwner: Sendable {}

  /// The instrument told about every loadable's attempts, every claim and every job; `nil` (the
  /// default) for none.
  ///
  /// Setting it affects the attempts that start afterwards: an attempt is reported, start to
  /// end, to the instruments that were installed when it started.
  public static var processWide: (any LoadInstrument)? {
    get {
      guard mayReport.load(ordering: .acquiring) else { return nil }
      return installed.withLock(owner: lockOwner) { $0 }
    }
    set {
      // The old instrument is released after the lock: its deinit is user code. The flag is set
      // under the lock: set after it, two setters (or a setter and a loadable given its own
      // instrument) could leave it false with an instrument installed, which then hears nothing.
      let old = installed.withLock(owner: lockOwner) { installed in
        defer {
          installed = newValue
          mayReport.store(newValue != nil || perObjectInstalled.load(ordering: .relaxed), ordering: .releasing)
        }
        return installed
      }
      _ = old
    }
  }

  /// Whether any instrument may hear of anything: one atomic load.
  @inlinable @inline(__always) static var isActive: Bool { mayReport.load(ordering: .relaxed) }

  /// Notes that some object has its own instrument from now on.
  static func noteObjectInstrument() {
    guard !perObjectInstalled.load(ordering: .relaxed) else { return }
    // Under the setter's lock, so that a setter that read the flag false cannot store `mayReport`
    // false after this (see ``processWide``).
    installed.withLock(owner: lockOwner) { _ in
      perObjectInstalled.store(true, ordering: .relaxed)
      mayReport.store(true, ordering: .releasing)
    }
  }

  /// The instruments to tell about an object: its own first, then the process-wide one.
  /// Empty when none is installed.
  static func instruments(own: (any LoadInstrument)?) -> [any LoadInstrument] {
    var all: [any LoadInstrument] = []
    if let own { all.append(own) }
    if let processWide { all.append(processWide) }
    return all
  }
}

extension AsyncLoadable {
  /// An instrument for this loadable alone, told about its attempts before the process-wide
  /// ``LoadInstrumentation/processWide`` one; `nil` (the default) for none.
  ///
  /// It applies from the next attempt. It does not extend to the loadable's dependencies: give
  /// them their own, or use the process-wide instrument to follow a whole graph.
  public var instrument: (any LoadInstrument)? {
    get { state.withLock(owner: self) { $0.extras?.settings?.instrument } }
    set {
      if newValue != nil { LoadInstrumentation.noteObjectInstrument() }
      // The old settings (the user's instrument, clock and closures) are released after the lock.
      _ = withState { state -> LoadableSettings? in
        let old = state.extras?.settings
        state.more.settings = LoadableSettings(options: old?.options, name: old?.name, instrument: newValue)
        return old
      }
    }
  }

  /// This loadable's own instrument, read only once some instrument was installed somewhere.
  final var ownInstrument: (any LoadInstrument)? {
    LoadInstrumentation.perObjectInstalled.load(ordering: .relaxed) ? instrument : nil
  }
}

extension LoadInstrumentation {
  /// Tells `instruments`, user code, as observers are told: outside any attempt (a load an
  /// instrument makes is no dependency of an attempt it is told inside: a retry, told inside the
  /// attempt's work; a dependency's start, or a claim, made inside another attempt) and as no part
  /// of an attempt's end (told where an attempt ends on its task, or where a `flatMap`'s step
  /// starts its inner loadable there: a write an instrument makes inside a task-local of its own
  /// must not let a `map`'s transform run inline, inside that task-local; SPEC §1). A job's
  /// reports are told in its effects' notify phase, which is both already.
  static func tell(_ instruments: [any LoadInstrument], _ body: (any LoadInstrument) -> Void) {
    let thread = PerThread.current
    AttemptContext.outside(on: thread) {
      AttemptContext.runningCallbacks(on: thread) { for instrument in instruments { body(instrument) } }
    }
  }
}
