import Foundation

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
        let milliseconds = date.milliseconds
        if Self.civilMilliseconds.contains(milliseconds) { return formatCanonicalTimestamp(milliseconds) }
        return formatWithFoundation(milliseconds)
    }

    /// Where the formatter below and Foundation's write the same text: from 1583 (Foundation's
    /// calendar is Julian before October 1582) to the last recordable instant.
    static let civilMilliseconds: ClosedRange<Int64> =
        parseCanonicalTimestamp("1583-01-01T00:00:00.000Z")!.milliseconds...Date.recordableMilliseconds.upperBound

    /// The stored form, `yyyy-MM-ddTHH:mm:ss.SSSZ`, written without a formatter: projections write
    /// it for every timestamp of every row (Howard Hinnant's civil_from_days).
    static func formatCanonicalTimestamp(_ milliseconds: Int64) -> String {
        let (days, inDay) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        let (day0, ms) = inDay < 0 ? (days - 1, inDay + 86_400_000) : (days, inDay)
        let z = day0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let fields: [(value: Int64, digits: Int, after: UInt8?)] = [
            (year, 4, UInt8(ascii: "-")), (month, 2, UInt8(ascii: "-")), (day, 2, UInt8(ascii: "T")),
            (ms / 3_600_000, 2, UInt8(ascii: ":")), (ms / 60_000 % 60, 2, UInt8(ascii: ":")), (ms / 1000 % 60, 2, UInt8(ascii: ".")),
            (ms % 1000, 3, UInt8(ascii: "Z")),
        ]
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            for field in fields {
                var value = field.value
                for offset in stride(from: field.digits - 1, through: 0, by: -1) {
                    buffer[index + offset] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                index += field.digits
                if let after = field.after {
                    buffer[index] = after
                    index += 1
                }
            }
            return index
        }
    }

    static func formatWithFoundation(_ milliseconds: Int64) -> String {
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (wholeSeconds, millis) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let base = Date(timeIntervalSince1970: Double(wholeSeconds)).formatted(.iso8601)
        return base.dropLast() + "." + String(repeating: "0", count: 3 - String(millis).count) + String(millis) + "Z"
    }

    /// A UTC time in ISO 8601, when it is one the ledger can record (`Date.isRecordable`).
    public static func parseTimestamp(_ text: String) -> Date? {
        // Text in the stored shape is judged by the strict reader alone: Foundation's would roll
        // February 30 over into March.
        if text.utf8.count == 24, text.hasSuffix("Z"), text.utf8[text.utf8.index(text.utf8.startIndex, offsetBy: 19)] == UInt8(ascii: ".") {
            return parseCanonicalTimestamp(text)
        }
        return parseAnyTimestamp(text).flatMap { $0.isRecordable ? $0 : nil }
    }

    /// The stored form, `yyyy-MM-ddTHH:mm:ss.SSSZ`, read without a formatter: replays read it
    /// millions of times.
    static func parseCanonicalTimestamp(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "."),
              bytes[23] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let digit = Int(bytes[index]) - 48
                guard (0...9).contains(digit) else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19), let millis = number(20..<23),
              (1...12).contains(month), hour < 24, minute < 60, second < 60
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthLength = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...monthLength).contains(day) else { return nil }
        // Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let milliseconds = (((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + millis
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    static func parseAnyTimestamp(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601.year().month().day().dateTimeSeparator(.standard).time(includingFractionalSeconds: true)) {
            return date
        }
        return try? Date(text, strategy: .iso8601)
    }
}
