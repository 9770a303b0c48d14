import Foundation
@testable import LoadableKit
import LoadableKitTesting
import Testing

/// Mutates valid job JSON with a small seeded generator and checks that every decode either
/// succeeds or throws a `JobError` — never another error, never a crash.
@Suite("Job JSON under mutation", .timeLimit(.minutes(2)))
struct JobJSONPropertyTests {
  /// A valid JSON form with a checkpoint and messages, from a paused job.
  func validJSON() async throws -> Data {
    let work = CountingWork(units: 4)
    let job = Job(work)
    let gate = JobLatch()
    JobHooks.set(work.id) { unit in if unit == 2 { await gate.wait() } }
    job.start()
    await eventually { JobLedger[work.id].started.count == 3 }
    #expect(job.pause())
    gate.open()
    await job.waitUntilParked()
    return try job.toJSON()
  }

  enum Mutation: CaseIterable {
    case truncate, flipByte, insertByte, deleteRange, wrongType, hugeNumber, deepNesting, unknownKind,
      removeKey, duplicateSection
  }

  func mutate(_ data: Data, _ mutation: Mutation, using generator: inout SplitMix64) -> Data {
    var bytes = [UInt8](data)
    guard !bytes.isEmpty else { return data }
    let position = Int.random(in: 0..<bytes.count, using: &generator)
    switch mutation {
    case .truncate:
      return Data(bytes[..<position])
    case .flipByte:
      bytes[position] ^= UInt8.random(in: 1...255, using: &generator)
    case .insertByte:
      bytes.insert(UInt8.random(in: 0...255, using: &generator), at: position)
    case .deleteRange:
      let end = min(bytes.count, position + Int.random(in: 1...16, using: &generator))
      bytes.removeSubrange(position..<end)
    case .wrongType, .hugeNumber, .unknownKind, .removeKey:
      guard var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return data }
      let keys = object.keys.sorted()
      guard !keys.isEmpty else { return data }
      let key = keys[Int.random(in: 0..<keys.count, using: &generator)]
      switch mutation {
      case .wrongType:
        let replacements: [Any] = ["text", 42, 3.5, true, NSNull(), [1, 2], ["a": 1]]
        object[key] = replacements[Int.random(in: 0..<replacements.count, using: &generator)]
      case .hugeNumber:
        object[key] = [1e308, -1e308, Double(Int.max) * 4, 18_446_744_073_709_551_615 as UInt64][
          Int.random(in: 0..<4, using: &generator)]
      case .unknownKind:
        object["kind"] = "kind.\(generator.next())"
      default:
        object[key] = nil
      }
      return (try? JSONSerialization.data(withJSONObject: object)) ?? data
    case .deepNesting:
      let depth = Int.random(in: 100...20_000, using: &generator)
      let open = Data(repeating: UInt8(ascii: "["), count: depth)
      let close = Data(repeating: UInt8(ascii: "]"), count: depth)
      guard var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
        let key = object.keys.sorted().first
      else { return open + data + close }
      object[key] = "__NEST__"
      let text = String(decoding: (try? JSONSerialization.data(withJSONObject: object)) ?? data, as: UTF8.self)
      return Data(text.replacingOccurrences(of: "\"__NEST__\"", with: String(decoding: open + close, as: UTF8.self)).utf8)
    case .duplicateSection:
      let end = min(bytes.count, position + Int.random(in: 1...64, using: &generator))
      bytes.insert(contentsOf: bytes[position..<end], at: end)
    }
    return Data(bytes)
  }

  @Test func everyMutationDecodesOrFailsWithAJobError() async throws {
    let valid = try await validJSON()
    #expect(try Job<CountingWork>.fromJSON(valid).status == .paused)
    var generator = SplitMix64(seed: 2026)
    var outcomes: [String: Int] = [:]
    for round in 0..<3_000 {
      let mutation = Mutation.allCases[round % Mutation.allCases.count]
      var data = valid
      for _ in 0...Int.random(in: 0...2, using: &generator) {
        data = mutate(data, mutation, using: &generator)
      }
      do {
        _ = try Job<CountingWork>.fromJSON(data)
        _ = try JobRegistry(CountingWork.self).job(fromJSON: data)
        outcomes["decoded", default: 0] += 1
      } catch let error as JobError {
        outcomes["\(error.code)", default: 0] += 1
        #expect(!error.message.isEmpty)
      } catch {
        Issue.record("round \(round) (\(mutation)): \(type(of: error)) is not a JobError: \(error)")
        return
      }
    }
    // The generator must actually reach the interesting failures.
    for code in ["truncated", "malformed", "kindMismatch"] {
      #expect(outcomes[code, default: 0] > 0, "no \(code) among \(outcomes)")
    }
  }
}
