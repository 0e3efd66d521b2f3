import Foundation

/// Instants at the precision the ledger stores, sends and compares them: whole milliseconds since
/// 1970, as the App Store reports them.
///
/// A `Date` is a binary fraction of seconds, and the same millisecond read back from PostgreSQL
/// (microseconds since 2000) and parsed from text (milliseconds since 1970) can differ in its last
/// bits. Comparing such dates directly puts an instant on the wrong side of a period's edge; compare
/// `milliseconds` instead.
extension Date {
    /// The instant `milliseconds` after 1970-01-01T00:00:00Z.
    public init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// The instants the ledger records: 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z, as
    /// milliseconds since 1970. Its stored times have four-digit years, and the milliseconds of
    /// instants far beyond (an App Store date of 9223372036854775807 ms) do not fit an `Int64`.
    public static let recordableMilliseconds: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999

    /// The instant `milliseconds` after 1970, when the ledger can record it.
    public init?(recordableMilliseconds milliseconds: Int64) {
        guard Self.recordableMilliseconds.contains(milliseconds) else { return nil }
        self.init(milliseconds: milliseconds)
    }

    /// Whether the ledger can record this instant (see `recordableMilliseconds`).
    public var isRecordable: Bool {
        let value = timeIntervalSince1970 * 1000
        return value.isFinite && Double(Self.recordableMilliseconds.lowerBound) <= value
            && value < Double(Self.recordableMilliseconds.upperBound) + 1
    }

    /// Milliseconds since 1970, to the nearest.
    public var milliseconds: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded())
    }
}
