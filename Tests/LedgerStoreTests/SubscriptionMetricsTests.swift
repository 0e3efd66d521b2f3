import Foundation
import LedgerApplication
import LedgerDomain
import LedgerDomainTesting
@testable import LedgerStore
import LedgerTesting
import Testing

/// The subscription figures against a history worked out by hand: monthly and yearly plans, a
/// trial that converts and one that expires, a lapse and a reactivation, a refunded renewal, two
/// currencies.
@Suite struct SubscriptionMetricsTests {
    static let app = "com.example.metrics"

    static func at(_ day: String) -> Date { LedgerJSON.parseTimestamp(day + "T12:00:00Z")! }

    @Test func theFiguresOfEachMonthAreTheOnesWorkedOutByHand() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let ledger = PostgresLedger(client: client, logger: TestDatabase.logger)
            #expect(try await ledger.registry.addApp(Self.app, sharedSecret: nil))
            let handler = ledger.handler
            try await handler.defineProduct(try Product(productId: "pro.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                        subscriptionGroup: "pro", prices: ["USD": "9.99", "EUR": "8.99"]), app: Self.app)
            try await handler.defineProduct(try Product(productId: "max.year", type: .autoRenewable, duration: ISODuration(parsing: "P1Y"),
                                                        subscriptionGroup: "max", prices: ["USD": "99.99"]), app: Self.app)
            func periods(_ user: String, _ product: String, _ starts: [String], end: String, price: String, currency: String = "USD",
                         trial: Bool = false) async throws {
                let bounds = starts + [end]
                for index in starts.indices {
                    let transaction = TestTransaction("\(user)-\(index + 1)", product, original: "\(user)-1", purchased: Self.at(bounds[index]),
                                                      expires: Self.at(bounds[index + 1]), extra: trial ? ["is_trial_period": "true"] : [:])
                    try await AuditQueriesTests.record(handler, app: Self.app, user: user, (transaction, .production),
                                                       price: trial ? "0" : price, currency: currency)
                }
            }
            // A: three months from 10 January, then stops.
            try await periods("a", "pro.month", ["2026-01-10", "2026-02-10", "2026-03-10"], end: "2026-04-10", price: "9.99")
            // B (euros): a week's trial from 5 January, then paid monthly from 12 January to 12 May.
            try await periods("b", "pro.month", ["2026-01-05"], end: "2026-01-12", price: "0", currency: "EUR", trial: true)
            for (index, start) in ["2026-01-12", "2026-02-12", "2026-03-12", "2026-04-12"].enumerated() {
                let end = ["2026-02-12", "2026-03-12", "2026-04-12", "2026-05-12"][index]
                let transaction = TestTransaction("b-\(index + 2)", "pro.month", original: "b-1", purchased: Self.at(start), expires: Self.at(end))
                try await AuditQueriesTests.record(handler, app: Self.app, user: "b", (transaction, .production), price: "8.99", currency: "EUR")
            }
            // C: a trial in February that expires.
            try await periods("c", "pro.month", ["2026-02-01"], end: "2026-02-08", price: "0", trial: true)
            // D: a year from 20 January.
            try await periods("d", "max.year", ["2026-01-20"], end: "2027-01-20", price: "99.99")
            // E: January, a lapse, back from 15 March for a month.
            try await periods("e", "pro.month", ["2026-01-01"], end: "2026-02-01", price: "9.99")
            let back = TestTransaction("e-2", "pro.month", original: "e-1", purchased: Self.at("2026-03-15"), expires: Self.at("2026-04-15"))
            try await AuditQueriesTests.record(handler, app: Self.app, user: "e", (back, .production), price: "9.99", currency: "USD")
            // F: January, and a February renewal refunded on 5 February.
            try await periods("f", "pro.month", ["2026-01-03", "2026-02-03"], end: "2026-03-03", price: "9.99")
            _ = try await handler.execute(app: Self.app, user: "f") { state, _ in
                (try UserDecisions.revoke(transactionId: "f-2", revokedAt: Self.at("2026-02-05"), reason: "refund", on: state), ())
            }
            try await AuditQueriesTests.catchUp(client, settings)

            let report = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.at("2026-01-01").addingTimeInterval(-43_200),
                                                          to: LedgerJSON.parseTimestamp("2026-05-01T00:00:00Z")!, byMonth: true)
            func figures(_ month: String, _ currency: String) -> String {
                guard let f = report.subscriptions.first(where: { $0.interval == month && $0.currency == currency }) else { return "-" }
                return "start \(f.activeAtStart) end \(f.activeAtEnd) mrr \(f.mrr) new \(f.new) renewed \(f.renewed) reactivated \(f.reactivated) "
                    + "churned \(f.churned) rate \(f.churnRate ?? "-") trials \(f.trialsStarted)/\(f.trialsConverted)/\(f.trialsExpired)"
            }
            // January: A, D, E, F new; all four active at its end; MRR 9.99 × 3 + 99.99 / 12 = 38.3025.
            #expect(figures("2026-01", "USD") == "start 0 end 4 mrr 38.3 new 4 renewed 0 reactivated 0 churned 0 rate - trials 0/0/0")
            // February: A renews; E lapses on 1 February and F's refunded renewal ends its service on 3 February: 2 of 4 churned.
            // C's trial starts and expires. Left: A and D, 9.99 + 8.3325.
            #expect(figures("2026-02", "USD") == "start 4 end 2 mrr 18.32 new 0 renewed 1 reactivated 0 churned 2 rate 0.5 trials 1/0/1")
            // March: A renews, E comes back; A, D, E active at its end: 28.3125.
            #expect(figures("2026-03", "USD") == "start 2 end 3 mrr 28.31 new 0 renewed 1 reactivated 1 churned 0 rate 0 trials 0/0/0")
            // April: A (10th) and E (15th) end: 2 of 3; D alone is left.
            #expect(figures("2026-04", "USD") == "start 3 end 1 mrr 8.33 new 0 renewed 0 reactivated 0 churned 2 rate 0.6667 trials 0/0/0")
            // Euros: B's trial converts in January, then B renews every month.
            #expect(figures("2026-01", "EUR") == "start 0 end 1 mrr 8.99 new 1 renewed 0 reactivated 0 churned 0 rate - trials 1/1/0")
            #expect(figures("2026-03", "EUR") == "start 1 end 1 mrr 8.99 new 0 renewed 1 reactivated 0 churned 0 rate 0 trials 0/0/0")

            // Refunds in February: A's and F's payments, F's refunded: half by count and by amount.
            let february = try #require(report.refunds.first { $0.interval == "2026-02" && $0.currency == "USD" })
            #expect(february.payments == 2 && february.refunds == 1 && february.refundRateByCount == "0.5" && february.refundRateByAmount == "0.5")

            // Cohorts: January's payers (A, D, E, F): 129.96 in their first month, then F's refund nets February to A's 9.99.
            let cohort = report.cohorts.filter { $0.cohort == "2026-01" && $0.currency == "USD" }.map { "\($0.monthsSince):\($0.net)" }
            #expect(cohort == ["0:129.96", "1:9.99", "2:19.98"])

            // As of 4 February: F's refund was not yet recorded... it was recorded now, so the past answers without it.
            let early = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: LedgerJSON.parseTimestamp("2026-01-01T00:00:00Z")!,
                                                         to: LedgerJSON.parseTimestamp("2026-05-01T00:00:00Z")!, byMonth: true,
                                                         asOf: Date().addingTimeInterval(-3_600))
            #expect(early.subscriptions.isEmpty && early.refunds.isEmpty, "an hour ago the log held none of these facts")
        }
    }
}
