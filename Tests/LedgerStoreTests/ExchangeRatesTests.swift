import Foundation
import LedgerApplication
import LedgerDomain
import LedgerDomainTesting
@testable import LedgerStore
import LedgerTesting
import Testing

/// The metrics in one reporting currency, at the operator's rates: each currency at its rate on or
/// before the interval's last day, a currency without one left out and named; and rate files
/// refused whole, with the line and column at fault.
@Suite struct ExchangeRatesTests {
    static let app = "com.example.rates"

    static func at(_ day: String) -> Date { LedgerJSON.parseTimestamp(day + "T12:00:00Z")! }

    @Test func aFileWithAnythingWrongIsRefusedNamingTheLineAndColumn() {
        func refusal(_ csv: String) -> String? {
            do { _ = try ExchangeRate.parse(csv: csv); return nil } catch { return error.message }
        }
        #expect(refusal("") == "line 1: the file is empty; it starts with the header date,currency,reporting_currency,rate")
        #expect(refusal("day,currency,reporting_currency,rate\n")?.hasPrefix("line 1: the header is 'day,currency,reporting_currency,rate'") == true)
        #expect(refusal("date,currency,reporting_currency,rate\n") == "line 2: the file has a header and no rates")
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,0.9461\n2026-11-31,JPY,EUR,0.0061\n")
                == "line 3, column 1 (date): '2026-11-31' is not a day such as 2026-11-30")
        #expect(refusal("rate,date,currency,reporting_currency\n0.9461,2026-11-30,usd,EUR\n")
                == "line 2, column 3: 'usd' is not an ISO 4217 currency code such as EUR")
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,-1\n")?.hasPrefix("line 2, column 4 (rate): '-1' is not a positive decimal") == true)
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,0\n")?.hasPrefix("line 2, column 4 (rate): '0'") == true)
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,EUR,EUR,1\n") == "line 2: a rate of EUR into itself is always 1; leave it out")
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,0.9\n2026-11-30,USD,EUR,0.91\n")
                == "line 3: USD into EUR on 2026-11-30 was already given on line 2")
        #expect(refusal("date,currency,reporting_currency,rate\n2026-11-30,USD,EUR\n") == "line 2: 3 fields; each line has 4: date,currency,reporting_currency,rate")
        let rates = try? ExchangeRate.parse(csv: "rate,date,currency,reporting_currency\r\n0.9461,2026-11-30,USD,EUR\r\n\r\n")
        #expect(rates == [ExchangeRate(reportingCurrency: "EUR", currency: "USD", date: "2026-11-30", rate: "0.9461")])
    }

    @Test func metricsInOneReportingCurrencyUseEachIntervalsRateAndNameWhatHasNone() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let ledger = PostgresLedger(client: client, logger: TestDatabase.logger)
            #expect(try await ledger.registry.addApp(Self.app, sharedSecret: nil))
            let handler = ledger.handler
            try await handler.defineProduct(try Product(productId: "pro.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                        subscriptionGroup: "pro", prices: ["USD": "9.99", "EUR": "8.99", "JPY": "1500"]), app: Self.app)
            // A pays in dollars from 10 January to 10 April, B in euros from 5 January to 5 March, C in yen in January.
            for (user, currency, price, starts) in [("a", "USD", "9.99", ["2026-01-10", "2026-02-10", "2026-03-10", "2026-04-10"]),
                                                    ("b", "EUR", "8.99", ["2026-01-05", "2026-02-05", "2026-03-05"]),
                                                    ("c", "JPY", "1500", ["2026-01-20", "2026-02-20"])] {
                for index in 0..<(starts.count - 1) {
                    let transaction = TestTransaction("\(user)-\(index + 1)", "pro.month", original: "\(user)-1", purchased: Self.at(starts[index]),
                                                      expires: Self.at(starts[index + 1]))
                    try await AuditQueriesTests.record(handler, app: Self.app, user: user, (transaction, .production), price: price, currency: currency)
                }
            }
            try await AuditQueriesTests.catchUp(client, settings)
            // Dollars: a rate from mid-January, another on February's last day. Yen: only from March.
            let csv = """
                date,currency,reporting_currency,rate
                2026-01-15,USD,EUR,0.90
                2026-02-28,USD,EUR,0.95
                2026-03-01,JPY,EUR,0.0061
                2026-01-15,EUR,USD,1.1
                """
            #expect(try await ledger.exchangeRates.set(try ExchangeRate.parse(csv: csv)) == 4)
            #expect(try await ledger.exchangeRates.set([ExchangeRate(reportingCurrency: "EUR", currency: "USD", date: "2026-02-28", rate: "0.96")]) == 1,
                    "a rate given again for a day replaces it")
            #expect(try await ledger.exchangeRates.rates(into: "EUR").map(\.rate) == ["0.0061", "0.9", "0.96"])

            let report = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.at("2026-01-01").addingTimeInterval(-43_200),
                                                          to: LedgerJSON.parseTimestamp("2026-04-01T00:00:00Z")!, byMonth: true, reportingCurrency: "EUR")
            let converted = try #require(report.converted)
            #expect(converted.currency == "EUR" && report.subscriptions.contains { $0.currency == "JPY" }, "the figures in their own currencies stay")
            let mrr = Dictionary(uniqueKeysWithValues: converted.subscriptions.map { ($0.interval, "\($0.mrr) \($0.activeAtEnd) \($0.new)") })
            // January: 9.99 × 0.90 + 8.99 = 17.981; C's yen have no rate yet: left out, named.
            #expect(mrr["2026-01"] == "17.98 2 2")
            #expect(converted.unconverted.map { "\($0.interval) \($0.currency)" } == ["2026-01 JPY", "2026-02 JPY"], "yen only from March")
            // February: dollars at February's last day's rate, 9.99 × 0.96 + 8.99; C's lapse on 20 February is in yen, left out.
            #expect(mrr["2026-02"] == "18.58 2 0")
            // March: A alone at the end (9.99 × 0.96); B ended on 5 March.
            #expect(mrr["2026-03"] == "9.59 1 0")
            #expect(converted.rates.map { "\($0.interval) \($0.currency) \($0.rate) \($0.rateDate)" }
                    == ["2026-01 USD 0.9 2026-01-15", "2026-02 USD 0.96 2026-02-28", "2026-03 USD 0.96 2026-02-28"])
            // Gross of January in euros: 9.99 × 0.90 + 8.99; the yen's left out.
            #expect(converted.refunds.first { $0.interval == "2026-01" }?.gross == "17.98")
        }
    }
}
