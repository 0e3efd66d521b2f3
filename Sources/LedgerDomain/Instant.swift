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

    /// Milliseconds since 1970, to the nearest.
    public var milliseconds: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded())
    }
}
