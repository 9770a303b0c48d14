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
