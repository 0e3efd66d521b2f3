import Foundation

/// The ledger's clock passed `through` (stream `clock/<bundle id>`): what ends or starts by time
/// alone (a subscription's period, a billing grace period) and was due by then has happened.
///
/// No App Store fact marks the end of a period; the server that leads the projections appends
/// this once some user's deadline is due, so that the changes an expiry makes have a position in
/// the log like every other change, and a replay of the log gives the same changes.
public struct ClockPassed: LedgerEvent {
    public static let typeName = try! EventTypeName("ClockPassed", version: 1)

    public let through: Date

    public init(through: Date) {
        self.through = through
    }
}
