import Foundation
import LedgerDomain

/// Reads and writes the App Store's date fields.
///
/// A date arrives in up to three keys: `purchase_date_ms` (epoch milliseconds, as a string or a
/// number), `purchase_date` (`2013-01-01 00:00:00 Etc/GMT`, or in old transaction receipts sometimes
/// epoch milliseconds again, as `expires_date` is) and `purchase_date_pst` (the same instant in
/// `America/Los_Angeles`). The milliseconds are exact, so they win; the texts are read with the zone
/// they name. ISO 8601 is accepted too, for proxies that rewrite answers.
public enum AppStoreDate {
    /// The date under `key`, trying `key_ms`, `key`, `key_pst` in that order.
    /// A date the ledger cannot record (`Date.recordableMilliseconds`) counts as unreadable.
    static func read(_ key: String, in object: LenientJSON) -> Date? {
        if let millis = object[key + "_ms"].int64, let date = Date(recordableMilliseconds: millis) {
            return date
        }
        for candidate in [key, key + "_pst", key + "_formatted"] {
            if let text = object[candidate].string, let date = parse(text) {
                return date
            }
        }
        return nil
    }

    /// Parses one date text: epoch milliseconds, `yyyy-MM-dd HH:mm:ss ZONE`, or ISO 8601; nil for
    /// anything else and for dates the ledger cannot record (`Date.recordableMilliseconds`).
    public static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isASCIIDigit) {
            return Int64(trimmed).flatMap(Date.init(recordableMilliseconds:))
        }
        let date = parseZoned(trimmed)
            ?? (try? Date(trimmed, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            ?? (try? Date(trimmed, strategy: Date.ISO8601FormatStyle()))
        return date.flatMap { $0.isRecordable ? $0 : nil }
    }

    /// `2013-01-01 00:00:00 Etc/GMT`, `2012-12-31 16:00:00 America/Los_Angeles`; a zone abbreviation
    /// (`GMT`, `PST`) or an offset (`+0000`) also works. Without a zone the time is UTC.
    static func parseZoned(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 || parts.count == 3 else { return nil }
        let dateParts = parts[0].split(separator: "-")
        let timeParts = parts[1].split(separator: ":")
        guard dateParts.count == 3, timeParts.count == 3,
              let year = Int(dateParts[0]), let month = Int(dateParts[1]), let day = Int(dateParts[2]),
              let hour = Int(timeParts[0]), let minute = Int(timeParts[1])
        else { return nil }
        // Seconds from 0 to 60 (a leap second) with an optional fraction; `1e300`, `nan` and `inf`
        // are numbers to `Double` too, and would trap when made whole below.
        guard let second = Double(timeParts[2]), second >= 0, second < 61 else { return nil }
        let zone: TimeZone
        if parts.count == 3 {
            guard let named = timeZone(String(parts[2])) else { return nil }
            zone = named
        } else {
            zone = TimeZone(identifier: "UTC")!
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let whole = Int(second.rounded(.down))
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: whole)
        guard (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute),
              (0...60).contains(whole), let date = calendar.date(from: components)
        else { return nil }
        return date.addingTimeInterval(second - Double(whole))
    }

    private static func timeZone(_ name: String) -> TimeZone? {
        if let zone = TimeZone(identifier: name) { return zone }
        if let zone = TimeZone(abbreviation: name) { return zone }
        // An offset such as +0000 or -0800.
        let sign: Int
        switch name.first {
        case "+": sign = 1
        case "-": sign = -1
        default: return nil
        }
        let digits = name.dropFirst().filter { $0 != ":" }
        guard digits.count == 4, let value = Int(digits) else { return nil }
        return TimeZone(secondsFromGMT: sign * ((value / 100) * 3600 + (value % 100) * 60))
    }

    // MARK: Writing, as the App Store does (used by the simulator and by tests)

    /// `2013-01-01 00:00:00 Etc/GMT`.
    public static func gmtText(_ date: Date) -> String {
        text(date, zone: gmt, zoneName: "Etc/GMT")
    }

    /// The same instant in `America/Los_Angeles`, as the `_pst` keys carry it.
    public static func pacificText(_ date: Date) -> String {
        text(date, zone: pacific, zoneName: "America/Los_Angeles")
    }

    /// Epoch milliseconds as a string, as the `_ms` keys carry them.
    public static func millisecondsText(_ date: Date) -> String {
        String(date.milliseconds)
    }

    // Calendars are built once: making one per date is the slowest part of writing an answer.
    private static let gmt = calendar(TimeZone(identifier: "Etc/GMT") ?? TimeZone(secondsFromGMT: 0)!)
    private static let pacific = calendar(TimeZone(identifier: "America/Los_Angeles") ?? TimeZone(secondsFromGMT: -8 * 3600)!)

    private static func calendar(_ zone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar
    }

    private static func text(_ date: Date, zone calendar: Calendar, zoneName: String) -> String {
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String {
            let v = value ?? 0
            return v < 10 ? "0\(v)" : "\(v)"
        }
        return "\(c.year ?? 1970)-\(two(c.month))-\(two(c.day)) \(two(c.hour)):\(two(c.minute)):\(two(c.second)) \(zoneName)"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
