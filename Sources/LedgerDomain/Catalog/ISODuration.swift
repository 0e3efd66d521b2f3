import Foundation

/// A subscription length in ISO 8601 form (`P7D`, `P1M`, `P1Y`, `P1Y2M10D`, `P2W`), added with
/// calendar arithmetic in UTC: months and years first, clamped to the month's end (Jan 31 + P1M is
/// the last day of February), then weeks and days.
public struct ISODuration: Hashable, Sendable, CustomStringConvertible {
    public let years: Int
    public let months: Int
    public let weeks: Int
    public let days: Int

    public init(years: Int = 0, months: Int = 0, weeks: Int = 0, days: Int = 0) {
        self.years = years
        self.months = months
        self.weeks = weeks
        self.days = days
    }

    /// Parses the date part of an ISO 8601 duration; times (`T`) are not subscription lengths.
    public init(parsing text: String) throws(LedgerInputError) {
        var rest = Substring(text.uppercased())
        guard rest.first == "P", rest.count > 1 else { throw .invalidDuration(text) }
        rest = rest.dropFirst()
        var values: [Character: Int] = [:]
        var order: [Character] = []
        while !rest.isEmpty {
            let digits = rest.prefix(while: \.isNumber)
            guard !digits.isEmpty, digits.count <= 4, let value = Int(digits) else { throw .invalidDuration(text) }
            rest = rest.dropFirst(digits.count)
            guard let unit = rest.first, "YMWD".contains(unit), values[unit] == nil else { throw .invalidDuration(text) }
            values[unit] = value
            order.append(unit)
            rest = rest.dropFirst()
        }
        // Units must come in the order Y, M, W, D.
        guard order == order.sorted(by: { "YMWD".firstIndex(of: $0)! < "YMWD".firstIndex(of: $1)! }) else {
            throw .invalidDuration(text)
        }
        self.init(years: values["Y"] ?? 0, months: values["M"] ?? 0, weeks: values["W"] ?? 0, days: values["D"] ?? 0)
        guard totalMonths > 0 || totalDays > 0 else { throw .invalidDuration(text) }
    }

    var totalMonths: Int { years * 12 + months }
    var totalDays: Int { weeks * 7 + days }

    var isZero: Bool { totalMonths == 0 && totalDays == 0 }

    /// Whether both count in calendar months (and years) alone, or both in days (and weeks)
    /// alone: added together, such durations keep their meaning from a common start.
    func hasSameUnit(as other: ISODuration) -> Bool {
        (totalDays == 0 && other.totalDays == 0) || (totalMonths == 0 && other.totalMonths == 0)
    }

    /// Both durations, part by part: `P1M + P1M` is `P2M`, so that adding it once to a start gives
    /// the same day of the month two months on.
    public static func + (lhs: ISODuration, rhs: ISODuration) -> ISODuration {
        ISODuration(years: lhs.years + rhs.years, months: lhs.months + rhs.months, weeks: lhs.weeks + rhs.weeks, days: lhs.days + rhs.days)
    }

    /// `date` plus this duration, in the UTC Gregorian calendar.
    public func added(to date: Date) -> Date {
        var result = date
        if totalMonths != 0 {
            result = Self.utc.date(byAdding: .month, value: totalMonths, to: result) ?? result
        }
        if totalDays != 0 {
            result = Self.utc.date(byAdding: .day, value: totalDays, to: result) ?? result
        }
        return result
    }

    public var description: String {
        var text = "P"
        if years != 0 { text += "\(years)Y" }
        if months != 0 { text += "\(months)M" }
        if weeks != 0 { text += "\(weeks)W" }
        if days != 0 { text += "\(days)D" }
        return text
    }

    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}

extension ISODuration: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
