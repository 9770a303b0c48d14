/// Keeping the ``LoadLimiter``'s queue in line with the claims, under the loader's lock: a load
/// takes its place in the queue when its claim starts it, at the key's priority then, and moves
/// when that priority changes, in the order the claims changed.
extension ContentLoaderState {
  /// A claim started `attempt` of `entry`: it takes its place in the queue now, before its task
  /// runs, so a slot that frees meanwhile goes to it if it is the most urgent.
  func reserveSlot(for entry: Entry, attempt: Attempt) {
    limiter?.reserve(entry.slotTicket, attempt: attempt.id, priority: entry.loadPriority)
  }

  /// The key's load priority was `before` and may have changed with its claims: its waiting load
  /// moves in the queue now, and its running task is raised after the lock when it went up.
  mutating func reprioritized(_ entry: Entry, from before: ClaimPriority, _ effects: inout Effects) {
    let priority = entry.loadPriority
    guard priority != before else { return }
    entry.demandVersion &+= 1
    effects.grantedSlots.append(contentsOf: limiter?.reprioritize(entry.slotTicket, to: priority) ?? [])
    effects.reprioritized.append((entry, priority, priority > before))
  }

  /// `entry`'s load is ranked by its claims and whoever waits for it as they are now, whatever rank
  /// its place had: a key's first claim joining a load already under way (`raised`: told as a
  /// raise — a lower rank than the place's is none, but a task is never lowered), or its last
  /// claim's interest gone while others wait (it drops back; `raised` false).
  mutating func rankAnew(_ entry: Entry, raised: Bool = true, _ effects: inout Effects) {
    let priority = entry.loadPriority
    entry.demandVersion &+= 1
    effects.grantedSlots.append(contentsOf: limiter?.reprioritize(entry.slotTicket, to: priority) ?? [])
    effects.reprioritized.append((entry, priority, raised))
  }

  /// `attempt` of `entry` is over: a place still reserved for it — its task never came for the
  /// slot (cancelled before it ran) — is given back, and the slot it was granted goes on.
  func attemptEnded(_ entry: Entry, _ attempt: Attempt, _ effects: inout Effects) {
    if let next = limiter?.cancelReservation(entry.slotTicket, attempt: attempt.id) {
      effects.grantedSlots.append(next)
    }
  }

  /// `started` was started, and its place reserved, before the loader read the key (``sync``):
  /// if that read did not find it running, it ended in between — a `cancelLoad()` on another
  /// thread takes the key's lock only — and its task will never come for its place, which is
  /// given back (``attemptEnded(_:_:_:)``). Called after that read by every step that starts or
  /// supersedes a load under the loader's lock.
  func givePlaceBackIfEnded(_ entry: Entry, _ started: Attempt, _ effects: inout Effects) {
    if entry.shown.attempt !== started { attemptEnded(entry, started, &effects) }
  }
}
