import Foundation
import LedgerDomain
import Testing

/// A period `[start, end)` is active at its start and not at its end, whichever way the two dates
/// reached the ledger: read back from PostgreSQL, or parsed from the `at` a caller sent.
@Suite("Period edges are compared at millisecond precision")
struct PeriodEdgeTests {
    /// A date as postgres-nio decodes a `timestamptz`: microseconds since 2000-01-01.
    static func fromPostgres(milliseconds: Int64) -> Date {
        let microsecondsSince2000 = (milliseconds - 946_684_800_000) * 1000
        return Date(timeInterval: Double(microsecondsSince2000) / 1_000_000, since: Date(timeIntervalSince1970: 946_684_800))
    }

    /// The same instant as a caller's `?at=` becomes: its text, parsed.
    static func fromText(_ date: Date) -> Date {
        LedgerJSON.parseTimestamp(LedgerJSON.formatTimestamp(date))!
    }

    /// Starts with a millisecond part, a month long, as a support engineer would check them.
    static let starts: [Int64] = (0..<500).map { 1_767_225_600_000 + Int64($0) * 86_400_123 + Int64($0 % 1000) }

    @Test("the two ways of arriving differ in their last bits for some instants (the reason for this rule)")
    func representationsDiffer() {
        let differing = Self.starts.filter { Self.fromPostgres(milliseconds: $0) != Self.fromText(Self.fromPostgres(milliseconds: $0)) }
        #expect(!differing.isEmpty)
    }

    @Test("active at its start, inactive at its end, for every period")
    func edges() {
        for start in Self.starts {
            let end = start + 2_592_000_000
            let period = SubscriptionPeriod(transactionId: "t", productId: "p", group: "g", kind: .nonRenewing,
                                            start: Self.fromPostgres(milliseconds: start), end: Self.fromPostgres(milliseconds: end))
            #expect(period.isActive(at: Self.fromText(period.start)), "at its start \(LedgerJSON.formatTimestamp(period.start))")
            #expect(!period.isActive(at: Self.fromText(period.end)), "at its end \(LedgerJSON.formatTimestamp(period.end))")
            #expect(period.isActive(at: Self.fromText(period.end.addingTimeInterval(-0.001))), "a millisecond before its end")
        }
    }

    @Test("entitlements at a period's end say inactive, with no activeUntil; at its start, active until its end")
    func entitlementEdges() {
        for start in Self.starts {
            let period = SubscriptionPeriod(transactionId: "t", productId: "p", group: "g", kind: .autoRenewable,
                                            start: Self.fromPostgres(milliseconds: start),
                                            end: Self.fromPostgres(milliseconds: start + 300_000))
            let atEnd = Entitlements(at: Self.fromText(period.end), owned: [], periods: [period], balances: [])
            #expect(atEnd.subscriptions.first?.isActive == false)
            #expect(atEnd.subscriptions.first?.activeUntil == nil)
            let atStart = Entitlements(at: Self.fromText(period.start), owned: [], periods: [period], balances: [])
            #expect(atStart.subscriptions.first?.activeUntil == period.end)
        }
    }
}
