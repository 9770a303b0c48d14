import Foundation

/// The JSON form of a job (see the "Jobs" article for the schema) and the rules for reading it.
enum JobJSON {
  /// The schema version this version of LoadableKit writes and the newest it reads.
  static let schemaVersion = 1

  static func encoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .custom { date, encoder in
      var container = encoder.singleValueContainer()
      try container.encode(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }
    return encoder
  }

  static func decoder() -> JSONDecoder {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .custom { decoder in
      let container = try decoder.singleValueContainer()
      let text = try container.decode(String.self)
      if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
      if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
      throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 date: \(text)")
    }
    return decoder
  }

  /// The fields read before anything else, so that a newer schema or another kind is reported as
  /// such rather than as a field that does not decode.
  private struct SchemaProbe: Decodable { var schemaVersion: Int }
  private struct KindProbe: Decodable { var kind: String }
  private struct OrderProbe: Decodable { var addedSequence: Int? }

  /// The place in its manager that a restored job's record holds, or `nil` when it holds none.
  static func addedSequence(of data: Data) -> Int? {
    (try? decoder().decode(OrderProbe.self, from: data))?.addedSequence
  }

  /// Checks the schema version and returns the kind.
  ///
  /// - Throws: ``JobError`` ``JobError/Code/truncated``, ``JobError/Code/malformed`` or
  ///   ``JobError/Code/unsupportedSchemaVersion``.
  static func kind(of data: Data) throws(JobError) -> String {
    let decoder = decoder()
    let version: Int
    do {
      version = try decoder.decode(SchemaProbe.self, from: data).schemaVersion
    } catch {
      throw failure(error, in: data)
    }
    guard version >= 1 else {
      throw JobError(code: .malformed, message: "schemaVersion \(version) is not a valid schema version")
    }
    guard version <= schemaVersion else {
      throw JobError(
        code: .unsupportedSchemaVersion,
        message: "schemaVersion \(version) is newer than \(schemaVersion), the newest this version of LoadableKit reads")
    }
    do {
      return try decoder.decode(KindProbe.self, from: data).kind
    } catch {
      throw failure(error, in: data)
    }
  }

  /// Decodes and validates the JSON form of a job of `Work`'s kind.
  static func decode<Work: JobWork>(_ data: Data, as _: Work.Type) throws(JobError) -> JobEnvelope<Work> {
    let kind = try kind(of: data)
    guard kind == Work.kind else {
      throw JobError(code: .kindMismatch, message: "the JSON holds a job of kind \"\(kind)\", not \"\(Work.kind)\"")
    }
    var envelope: JobEnvelope<Work>
    do {
      envelope = try decoder().decode(JobEnvelope<Work>.self, from: data)
    } catch {
      throw failure(error, in: data)
    }
    guard (0...1).contains(envelope.fractionCompleted) else {
      throw JobError(code: .malformed, message: "fractionCompleted \(envelope.fractionCompleted) is not between 0 and 1")
    }
    if let limit = envelope.messageLimit, limit < 0 {
      throw JobError(code: .malformed, message: "messageLimit \(limit) is negative")
    }
    if let dropped = envelope.droppedMessageCount, dropped < 0 {
      throw JobError(code: .malformed, message: "droppedMessageCount \(dropped) is negative")
    }
    // -0.0 is in 0...1, but progress is ordered by bit pattern, where it would sort above 1.
    if envelope.fractionCompleted == 0 { envelope.fractionCompleted = 0 }
    return envelope
  }

  /// Classifies a decoding failure.
  static func failure(_ error: any Error, in data: Data) -> JobError {
    if endsEarly(data) {
      return JobError(code: .truncated, message: "the JSON ends before its value does", underlyingError: error)
    }
    let detail = (error as? DecodingError).map(describe) ?? "\(error)"
    return JobError(code: .malformed, message: "not a job's JSON form: \(detail)", underlyingError: error)
  }

  /// Whether `data` is empty or stops inside an unfinished string, object or array: a prefix of
  /// JSON rather than wrong JSON. A byte that cannot appear in JSON outside a string, or a closing
  /// bracket too many, makes it wrong JSON instead. One pass, no recursion, whatever the nesting.
  static func endsEarly(_ data: Data) -> Bool {
    var depth = 0
    var inString = false
    var escaped = false
    var sawValue = false
    for byte in data {
      if inString {
        if escaped {
          escaped = false
        } else if byte == UInt8(ascii: "\\") {
          escaped = true
        } else if byte == UInt8(ascii: "\"") {
          inString = false
        }
        continue
      }
      switch byte {
      case UInt8(ascii: "\""):
        inString = true
        sawValue = true
      case UInt8(ascii: "{"), UInt8(ascii: "["):
        depth += 1
        sawValue = true
      case UInt8(ascii: "}"), UInt8(ascii: "]"):
        depth -= 1
        if depth < 0 { return false }
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"),
        UInt8(ascii: ":"), UInt8(ascii: ","):
        break
      case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
        UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"),
        UInt8(ascii: "f"), UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "n"):
        sawValue = true
      default:
        return false  // not JSON at all
      }
    }
    return !sawValue || inString || depth > 0
  }

  static func describe(_ error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
      var text = ""
      for key in context.codingPath {
        if let index = key.intValue {
          text += "[\(index)]"
        } else {
          text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
        }
      }
      return text.isEmpty ? "the top level" : text
    }
    switch error {
    case .typeMismatch(let type, let context):
      return "\(path(context)): expected \(type)"
    case .valueNotFound(let type, let context):
      return "\(path(context)): expected \(type), found null"
    case .keyNotFound(let key, let context):
      let parent = path(context)
      return parent == "the top level" ? "missing key \"\(key.stringValue)\"" : "\(parent): missing key \"\(key.stringValue)\""
    case .dataCorrupted(let context):
      return "\(path(context)): \(context.debugDescription)"
    @unknown default:
      return "\(error)"
    }
  }
}

/// The JSON form of a ``Job``; see the "Jobs" article for the schema.
struct JobEnvelope<Work: JobWork>: Codable {
  var schemaVersion: Int
  var kind: String
  var parameters: Work
  var status: JobStatus
  var checkpoint: Work.Checkpoint?
  var fractionCompleted: Double
  var messages: [JobMessage]
  /// The job's message limit; absent in JSON written before messages were capped.
  var messageLimit: Int?
  /// How many messages were dropped; absent in JSON written before messages were capped.
  var droppedMessageCount: Int?
  var error: PersistedJobError?
  /// The job's place in its ``JobManager``: the manager's records count the jobs in the order they
  /// were added. Absent in a job's own JSON form and in records written before the manager kept
  /// the order.
  var addedSequence: Int?
}

/// A failed job's error, as far as JSON can hold it.
///
/// `type` keeps the three values of the first schema, so that an older LoadableKit reads every
/// record: a ``ServerJobError`` and any other error are `other`, and `domain` tells a newer one
/// what they were.
struct PersistedJobError: Codable, Equatable {
  enum ErrorType: String, Codable {
    /// `CancellationError`.
    case cancellation
    /// A ``JobError``, restored with its code and message.
    case jobError
    /// A ``ServerJobError`` (`domain` is ``serverJobErrorDomain``), restored with its code and
    /// message; any other error, restored as a ``JobError`` with ``JobError/Code/workFailed`` and
    /// its ``JobError/originalError``.
    case other
  }
  var type: ErrorType
  /// The ``JobError/Code`` for `jobError`, the ``ServerJobError/Code`` for a server job's error.
  var code: String?
  var message: String
  /// The error's domain: ``jobErrorDomain``, ``serverJobErrorDomain``, or `NSError.domain` of any
  /// other error. Absent in records written before it was kept.
  var domain: String?
  /// `NSError.code` of an error of another domain.
  var numericCode: Int?

  static let jobErrorDomain = "LoadableKit.JobError"
  static let serverJobErrorDomain = "LoadableKit.ServerJobError"

  init(type: ErrorType, code: String? = nil, message: String, domain: String? = nil, numericCode: Int? = nil) {
    self.type = type
    self.code = code
    self.message = message
    self.domain = domain
    self.numericCode = numericCode
  }

  init(_ error: any Error) {
    switch error {
    case is CancellationError:
      self.init(type: .cancellation, message: "the job was cancelled")
    case let error as JobError:
      if error.code == .workFailed, let original = error.originalError {
        // A restored error stored again: it stays what it was.
        self.init(original)
      } else {
        self.init(type: .jobError, code: error.code.rawValue, message: error.message, domain: Self.jobErrorDomain)
      }
    case let error as ServerJobError:
      self.init(type: .other, code: error.code.rawValue, message: error.message, domain: Self.serverJobErrorDomain)
    default:
      let bridged = error as NSError
      self.init(JobError.OriginalError(domain: bridged.domain, code: bridged.code, description: String(describing: error)))
    }
  }

  private init(_ original: JobError.OriginalError) {
    self.init(type: .other, message: original.description, domain: original.domain, numericCode: original.code)
  }

  var restored: any Error {
    switch type {
    case .cancellation:
      return CancellationError()
    case .jobError:
      return JobError(code: JobError.Code(rawValue: code ?? JobError.Code.workFailed.rawValue), message: message)
    case .other:
      if domain == Self.serverJobErrorDomain, let code {
        return ServerJobError(code: ServerJobError.Code(rawValue: code), message: message)
      }
      if let domain, let numericCode {
        return JobError(restoring: JobError.OriginalError(domain: domain, code: numericCode, description: message))
      }
      return JobError(code: .workFailed, message: message)
    }
  }
}
