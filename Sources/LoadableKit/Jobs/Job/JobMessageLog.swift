/// A job's messages, capped: past ``limit`` the oldest are dropped and counted.
///
/// Appending is O(1) amortized: dropped messages stay in the storage until as many have gone as
/// the limit holds, and are then removed in one step, so the storage never holds more than about
/// twice the limit.
struct JobMessageLog: Sendable {
  private var storage: [JobMessage] = []
  private var start = 0
  /// The most messages kept; never negative.
  let limit: Int
  /// How many messages were dropped since the job was created (including before a restore). It
  /// stops at `Int.max`: a restored record may hold any count.
  private(set) var droppedCount: Int

  init(limit: Int, messages: [JobMessage] = [], droppedCount: Int = 0) {
    self.limit = max(limit, 0)
    self.droppedCount = max(droppedCount, 0)
    let excess = max(messages.count - self.limit, 0)
    self.storage = Array(messages.dropFirst(excess))
    self.droppedCount = Self.adding(excess, to: self.droppedCount)
  }

  private static func adding(_ count: Int, to dropped: Int) -> Int {
    let (sum, overflow) = dropped.addingReportingOverflow(count)
    return overflow ? .max : sum
  }

  /// The messages kept, oldest first.
  var messages: [JobMessage] { Array(storage[start...]) }

  /// How many messages the storage holds, dropped ones not yet removed included: at most
  /// ``limit`` plus `max(limit, 16)`. For the tests that check the log stays bounded.
  var storageCount: Int { storage.count }

  /// Appends `message`, dropping the oldest message when the log is full.
  mutating func append(_ message: JobMessage) {
    guard limit > 0 else {
      droppedCount = Self.adding(1, to: droppedCount)
      return
    }
    storage.append(message)
    guard storage.count - start > limit else { return }
    start += 1
    droppedCount = Self.adding(1, to: droppedCount)
    if start >= max(limit, 16) {
      storage.removeFirst(start)
      start = 0
    }
  }
}
