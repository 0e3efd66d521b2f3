import Foundation

/// An event about to be appended: its payload is JSON text that the store keeps as `jsonb`.
public struct NewEvent: Sendable, Hashable {
    public let eventID: UUID
    public let type: EventTypeName
    /// The event's payload, a JSON object.
    public let data: String
    /// Who sent it and why (request id, API key id, receipt hash), a JSON object.
    public let metadata: String
    /// Set when the fact must be recorded at most once (an App Store transaction).
    public let deduplicationKey: DeduplicationKey?

    public init(
        eventID: UUID = UUID(),
        type: EventTypeName,
        data: String,
        metadata: String = "{}",
        deduplicationKey: DeduplicationKey? = nil
    ) throws(LedgerInputError) {
        try Self.requireJSONObject(data, field: "event data")
        try Self.requireJSONObject(metadata, field: "event metadata")
        self.init(checked: data, metadata: metadata, eventID: eventID, type: type, deduplicationKey: deduplicationKey)
    }

    /// Encodes a payload with stable key order and builds the event.
    public init<Payload: Encodable>(
        eventID: UUID = UUID(),
        type: EventTypeName,
        payload: Payload,
        metadata: [String: String] = [:],
        deduplicationKey: DeduplicationKey? = nil
    ) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        try self.init(
            encodedData: String(decoding: try encoder.encode(payload), as: UTF8.self),
            metadata: String(decoding: try encoder.encode(metadata), as: UTF8.self),
            eventID: eventID, type: type, deduplicationKey: deduplicationKey
        )
    }

    /// An event whose payload and metadata a JSON encoder wrote, so valid JSON by construction:
    /// only that each is an object is checked, and that it holds no NUL when its escape appears
    /// (parsing the whole text again cost more than encoding it).
    init(encodedData data: String, metadata: String, eventID: UUID, type: EventTypeName, deduplicationKey: DeduplicationKey?) throws(LedgerInputError) {
        try Self.requireEncodedObject(data, field: "event data")
        try Self.requireEncodedObject(metadata, field: "event metadata")
        self.init(checked: data, metadata: metadata, eventID: eventID, type: type, deduplicationKey: deduplicationKey)
    }

    /// An event whose payload and metadata have been checked.
    private init(checked data: String, metadata: String, eventID: UUID, type: EventTypeName, deduplicationKey: DeduplicationKey?) {
        self.eventID = eventID
        self.type = type
        self.data = data
        self.metadata = metadata
        self.deduplicationKey = deduplicationKey
    }

    private static func requireEncodedObject(_ text: String, field: String) throws(LedgerInputError) {
        guard text.utf8.first == UInt8(ascii: "{") else { throw .invalidJSON(field: field, reason: "it is JSON, but not an object") }
        if text.contains("\\u0000") { try requireJSONObject(text, field: field) }
    }

    private static func requireJSONObject(_ text: String, field: String) throws(LedgerInputError) {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw .invalidJSON(field: field, reason: "it is not valid JSON")
        }
        guard parsed is [String: Any] else {
            throw .invalidJSON(field: field, reason: "it is JSON, but not an object")
        }
        // A JSON text holds U+0000 only as an escape; PostgreSQL's jsonb refuses it (22P05).
        if text.contains("\\u0000"), holdsNUL(parsed) { throw .nulCharacter(field: field) }
    }

    private static func holdsNUL(_ value: Any) -> Bool {
        switch value {
        case let text as String: text.unicodeScalars.contains("\u{0}")
        case let object as [String: Any]: object.contains { holdsNUL($0.key) || holdsNUL($0.value) }
        case let array as [Any]: array.contains(where: holdsNUL)
        default: false
        }
    }
}
