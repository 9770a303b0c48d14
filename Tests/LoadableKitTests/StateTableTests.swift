@testable import LoadableKit
import LoadableKitTesting
import Testing

/// One call of the SPEC §1 table.
enum Call: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case load, retryLoad, cancelLoad, sync, syncIfNeeded, fetch, fetchIfNeeded

  var testDescription: String { rawValue + "()" }

  /// Performs the call; returns the content for the fetches, `nil` otherwise.
  func run(on loadable: AsyncLoadable<Int>) async throws -> Int? {
    switch self {
    case .load: try await loadable.load()
    case .retryLoad: try await loadable.retryLoad()
    case .cancelLoad: loadable.cancelLoad()
    case .sync: loadable.sync()
    case .syncIfNeeded: loadable.syncIfNeeded()
    case .fetch: return try await loadable.fetch()
    case .fetchIfNeeded: return try await loadable.fetchIfNeeded()
    }
    return nil
  }

  var returnsContent: Bool { self == .fetch || self == .fetchIfNeeded }
}

/// What a cell of the table does.
enum Outcome: Sendable {
  /// Answers at once, with the existing content for the fetches.
  case returnsAtOnce
  /// Throws the stored `Boom(1)` at once.
  case throwsStored
  /// Starts an attempt and waits for it.
  case startsAndWaits
  /// Joins the running attempt and waits for it.
  case joins
  /// Starts an attempt without waiting.
  case startsInBackground
  /// Changes nothing.
  case nothing
  /// Cancels the running attempt.
  case cancels
}

func expected(_ call: Call, _ status: LoadStatus) -> Outcome {
  switch (call, status) {
  case (.load, .notLoaded), (.retryLoad, .notLoaded), (.fetch, .notLoaded), (.fetchIfNeeded, .notLoaded):
    .startsAndWaits
  case (.load, .loading), (.retryLoad, .loading), (.fetch, .loading), (.fetchIfNeeded, .loading):
    .joins  // fetchIfNeeded joins: the first load has no content, so needsSync is true
  case (.load, .loaded), (.retryLoad, .loaded), (.fetchIfNeeded, .loaded):
    .returnsAtOnce
  case (.load, .failed):
    .throwsStored
  case (.retryLoad, .failed), (.fetch, .failed), (.fetchIfNeeded, .failed), (.fetch, .loaded):
    .startsAndWaits
  case (.cancelLoad, .loading):
    .cancels
  case (.cancelLoad, _):
    .nothing
  case (.sync, .loading), (.syncIfNeeded, .loading), (.syncIfNeeded, .loaded):
    .nothing
  case (.sync, _), (.syncIfNeeded, _):
    .startsInBackground
  }
}

@Suite("SPEC §1 state table", .timeLimit(.minutes(1)))
struct StateTableTests {
  @Test(arguments: Call.allCases, [LoadStatus.notLoaded, .loading, .loaded, .failed])
  func cell(_ call: Call, _ status: LoadStatus) async throws {
    let (loadable, control) = try await makeLoadable(in: status)
    let startsBefore = control.startCount
    let contentBefore = loadable.content

    switch expected(call, status) {
    case .returnsAtOnce:
      let value = try await call.run(on: loadable)
      if call.returnsContent { #expect(value == 1) }
      #expect(loadable.loadStatus == status)

    case .throwsStored:
      await #expect(throws: Boom(code: 1)) { try await call.run(on: loadable) }
      #expect(loadable.loadStatus == .failed)

    case .startsAndWaits:
      let caller = Task { try await call.run(on: loadable) }
      try await control.waitForStart(startsBefore + 1)
      #expect(loadable.loadStatus == .loading)
      #expect(loadable.content == contentBefore, "a refresh keeps the old content readable")
      #expect(loadable.loadError == nil)
      await eventually { loadable.waiterCount == 1 }
      control.resolve(2)
      let value = try await caller.value
      if call.returnsContent { #expect(value == 2) }
      #expect(loadable.loadStatus == .loaded)
      #expect(loadable.content == 2)

    case .joins:
      let caller = Task { try await call.run(on: loadable) }
      await eventually { loadable.waiterCount == 1 }
      control.resolve(2)
      let value = try await caller.value
      if call.returnsContent { #expect(value == 2) }
      #expect(loadable.loadStatus == .loaded)

    case .startsInBackground:
      _ = try await call.run(on: loadable)
      #expect(loadable.loadStatus == .loading)
      #expect(loadable.content == contentBefore)
      try await control.waitForStart(startsBefore + 1)
      control.resolve(2)
      await eventually { loadable.loadStatus == .loaded }
      #expect(loadable.content == 2)

    case .nothing:
      _ = try await call.run(on: loadable)
      #expect(loadable.loadStatus == status)
      if status == .loading {
        control.resolve(2)
        await eventually { loadable.loadStatus == .loaded }
      }
      #expect(control.pendingCount == 0)

    case .cancels:
      let caller = Task { try await loadable.load() }
      await eventually { loadable.waiterCount == 1 }
      loadable.cancelLoad()
      await #expect(throws: CancellationError.self) { try await caller.value }
      #expect(loadable.loadStatus == .failed)
      #expect(loadable.loadError is CancellationError)
      await eventually { control.cancelledCount == 1 }
    }
    #expect(control.startCount == startsBefore + (startsAttempt(expected(call, status)) ? 1 : 0))
    #expect((loadable.loadError != nil) == (loadable.loadStatus == .failed))
  }

  private func startsAttempt(_ outcome: Outcome) -> Bool {
    switch outcome {
    case .startsAndWaits, .startsInBackground: true
    default: false
    }
  }
}
