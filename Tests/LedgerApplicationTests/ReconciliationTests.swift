import Foundation
@testable import LedgerApplication
import LedgerDomain
import Testing

/// The comparison itself, without a database: each kind of difference the ledger can explain,
/// made on purpose, and what stays a difference.
@Suite struct ReconciliationTests {
    static func line(_ sku: String, _ units: Int, price: String, country: String = "US", currency: String = "USD", day: String = "2026-11-02") -> SalesReportLine {
        SalesReportLine(sku: sku, title: sku, productTypeIdentifier: "IA1", units: String(units), developerProceeds: "0.70",
                        customerPrice: units < 0 ? "-" + price : price, customerCurrency: currency, proceedsCurrency: currency,
                        countryCode: country, beginDate: day, endDate: day, appleIdentifier: "1")
    }

    static func report(_ day: String, _ lines: [SalesReportLine]) -> SalesReportReceived {
        SalesReportReceived(reportDate: day, contentHash: "hash-\(day)", source: "test", vendorNumber: nil, columns: [], lines: lines,
                            otherLines: 0, supersedes: nil)
    }

    static func group(_ product: String, _ units: Int, price: String?, storefront: String? = "USA", currency: String = "USD",
                      day: String = "2026-11-02", refund: Bool = false, sandbox: Bool = false, free: Bool = false) -> LedgerSalesGroup {
        let amount = price.map { DecimalText.format(Decimal(string: $0)! * Decimal(units)) }
        return LedgerSalesGroup(grain: .init(day: day, productId: product, storefront: storefront, currency: currency, price: price, refund: refund,
                                             sandbox: sandbox), units: units, amount: amount, freeTrial: free, prorated: 0)
    }

    static func compare(_ reports: [SalesReportReceived], _ groups: [LedgerSalesGroup], days: [String] = ["2026-11-01", "2026-11-02", "2026-11-03"])
        -> Reconciliation
    {
        Reconciliation.compare(app: "com.example", days: days, timeZone: "America/Los_Angeles",
                               reports: Dictionary(uniqueKeysWithValues: reports.map { ($0.reportDate, $0) }), ledger: groups,
                               products: ["coins", "pro"])
    }

    static func codes(_ reconciliation: Reconciliation) -> [String] {
        reconciliation.rows.flatMap(\.explanations).map { "\($0.code.rawValue):\($0.units)" }.sorted()
    }

    @Test func equalSidesMatchAtApplesGrainAndPricesCompareAsNumbers() {
        let result = Self.compare([Self.report("2026-11-02", [Self.line("coins", 3, price: "0.990"), Self.line("coins", -1, price: "0.99")])],
                                  [Self.group("coins", 3, price: "0.99"), Self.group("coins", 1, price: "0.99", refund: true),
                                   Self.group("coins", 5, price: "0.99", sandbox: true)],
                                  days: ["2026-11-02"])
        #expect(result.rows.count == 1 && result.rows[0].status == .matched, "\(result.rows)")
        #expect(result.rows[0].apple.amountSold == "2.97" && result.rows[0].ledger.amountRefunded == "0.99" && result.sandboxUnits == 5)
        #expect(result.rows[0].appleProceeds == "1.4", "3 × 0.70 − 1 × 0.70")
    }

    @Test func aSaleNearMidnightOnTheOtherSidesNeighbouringDayIsExplained() {
        let result = Self.compare([Self.report("2026-11-01", []), Self.report("2026-11-02", [Self.line("coins", 1, price: "0.99")])],
                                  [Self.group("coins", 1, price: "0.99", day: "2026-11-01")])
        #expect(Self.codes(result) == ["other_day:1", "other_day:1"])
        #expect(result.rows.allSatisfy { $0.status == .explained })
    }

    @Test func anotherPriceAVerifyReceiptRowAndFreeUnitsAreToldApart() {
        let result = Self.compare(
            [Self.report("2026-11-02", [Self.line("coins", 2, price: "1.09", country: "FR", currency: "EUR"), Self.line("coins", 1, price: "0.99"),
                                        Self.line("pro", 1, price: "4.99")])],
            [Self.group("coins", 2, price: "0.99", storefront: "FRA", currency: "EUR"), Self.group("coins", 1, price: "0.99", storefront: nil),
             Self.group("pro", 1, price: "4.99"), Self.group("pro", 1, price: "0", free: true)],
            days: ["2026-11-02"]
        )
        #expect(Self.codes(result) == ["free_units:1", "no_country:1", "no_country:1", "price_differs:2", "price_differs:2"], "\(result.rows)")
        let french = result.rows.filter { $0.country == "FR" }
        #expect(french.count == 2 && french.allSatisfy { $0.status == .differs }, "a price that differs is for someone to look at")
    }

    @Test func whatOnlyOneSideHasIsNamedWithWhatToDo() {
        let result = Self.compare(
            [Self.report("2026-11-02", [Self.line("coins", 4, price: "0.99"), Self.line("coins", -1, price: "0.99"),
                                        Self.line("other.app.gems", 1, price: "1.99")])],
            [Self.group("coins", 2, price: "0.99"), Self.group("coins", 3, price: "0.99", day: "2026-11-03")]
        )
        #expect(Self.codes(result) == ["no_report:3", "not_in_ledger:2", "refund_not_in_ledger:1", "unknown_product:1"], "\(result.rows)")
        #expect(result.days.map(\.differing) == [0, 2, 1] && result.days.map { $0.report != nil } == [false, true, false])
    }
}
