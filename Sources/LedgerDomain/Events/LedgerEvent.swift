import Foundation

/// A fact the ledger records, with its stored, versioned type name and stable JSON.
///
/// The JSON of every event type is pinned by a golden-file test: changing a payload means a new
/// version (`PurchaseRecorded.v2`), never a silent change to what old events decode as.
public protocol LedgerEvent: Codable, Hashable, Sendable {
    static var typeName: EventTypeName { get }
}

/// The one JSON dialect of stored events: sorted keys, no escaped slashes, UTC times with
/// milliseconds (`2013-01-01T00:00:00.000Z`), money as decimal text.
public enum LedgerJSON {
    public static func encode<Event: Encodable>(_ value: Event) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatTimestamp(date))
        }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public static func decode<Event: Decodable>(_ type: Event.Type, from text: String) throws -> Event {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not a UTC time such as 2013-01-01T00:00:00.000Z")
            }
            return date
        }
        return try decoder.decode(type, from: Data(text.utf8))
    }

    public static func formatTimestamp(_ date: Date) -> String {
        // Whole milliseconds, as the App Store reports them; counted as integers so that binary
        // fractions (0.123 is 0.12299…) cannot shift the last digit.
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (wholeSeconds, millis) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let base = Date(timeIntervalSince1970: Double(wholeSeconds)).formatted(.iso8601)
        return base.dropLast() + "." + String(repeating: "0", count: 3 - String(millis).count) + String(millis) + "Z"
    }

    public static func parseTimestamp(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601.year().month().day().dateTimeSeparator(.standard).time(includingFractionalSeconds: true)) {
            return date
        }
        return try? Date(text, strategy: .iso8601)
    }
}

extension NewEvent {
    /// A new event from a typed payload, in the ledger's stored JSON.
    public init<Event: LedgerEvent>(
        _ event: Event,
        eventID: UUID = UUID(),
        metadata: [String: String] = [:],
        deduplicationKey: DeduplicationKey? = nil
    ) throws {
        try self.init(
            eventID: eventID,
            type: Event.typeName,
            data: LedgerJSON.encode(event),
            metadata: LedgerJSON.encode(metadata),
            deduplicationKey: deduplicationKey
        )
    }
}
