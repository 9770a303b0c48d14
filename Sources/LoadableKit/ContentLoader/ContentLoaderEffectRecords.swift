/// What an event of a key's machine returned, with the key's loadable, as a `ContentLoader`'s
/// effects record it, to be carried out phase by phase (``EffectsHost``).
///
/// Not generic: the loader passes over its lists once a phase, in the library's unspecialized
/// code, and a list of tuples (or structs) of its generic entry type would have its element's
/// metadata looked up at each pass (a tuple's: ~460 instructions). The entry is held as an object
/// and read back as the loader's entry type, which it always is (``ContentLoader/entry(_:)``).
struct EntryEffects {
  let entry: AnyObject
  let effects: LoadStateMachine.Effects
}

/// An attempt a `ContentLoader` started for a key's claims: its status change is delivered in the
/// notify phase, and its task launched in the resume phase (see ``EntryEffects``).
struct EntryLaunch {
  let entry: AnyObject
  let attempt: RunningAttempt
  let event: LoadStatusEvent?
}

/// The lists of a `ContentLoader`'s effects (`ContentLoaderState.Effects.Storage`), allocated on
/// the first thing recorded.
///
/// Not generic, for the reason ``EntryEffects`` is not: a class nested in the loader's generic
/// state had its metadata looked up at run time, in the library's unspecialized code, each time
/// one was made (~335 instructions; twice for a key claimed and let go). Entries are held as
/// objects, and the user values let go of in a box of the loader's type (`released`), made only
/// when there are some.
///
/// Filled by one thread under the loader's lock and carried out by the same thread after it,
/// never shared: its fields skip the dynamic exclusivity checks (each access of a class's stored
/// `var` costs one otherwise; a key claimed, loaded and let go made about twenty).
final class ContentLoaderEffectLists {
  @exclusivity(unchecked) var cancelTasks: [Task<Void, Never>] = []
  @exclusivity(unchecked) var entryEffects: [EntryEffects]?
  /// A claim's effects hold one launch at most (a refresh or a removal of several keys may hold
  /// more): the first is kept inline (an array allocated, appended to and freed cost ~300
  /// instructions a key claimed).
  @exclusivity(unchecked) var launches: InlineFirstArray<EntryLaunch>?
  @exclusivity(unchecked) var startTimers: [(AnyObject, UInt64)]?
  @exclusivity(unchecked) var reprioritized: [(AnyObject, ClaimPriority, Bool)]?
  @exclusivity(unchecked) var grantedSlots: [LoadLimiter.Continuation] = []
  @exclusivity(unchecked) var releasedObjects = ReleasedObjects()
  /// A `ContentLoaderState.Effects.ReleasedBox`.
  @exclusivity(unchecked) var released: AnyObject?
}

/// Objects an effects value lets go of, released when it dies (after the lock): only appended to,
/// never read. A key's claim, load and release let go of one to three at a time (an attempt, the
/// one its claims held, an evicted entry): those are kept inline, without an array to allocate.
struct ReleasedObjects {
  private var first: AnyObject?
  private var second: AnyObject?
  private var third: AnyObject?
  private var more: [AnyObject] = []

  mutating func append(_ object: AnyObject) {
    if first == nil {
      first = object
    } else if second == nil {
      second = object
    } else if third == nil {
      third = object
    } else {
      more.append(object)
    }
  }
}
