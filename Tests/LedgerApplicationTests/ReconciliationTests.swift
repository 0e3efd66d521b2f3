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

/// Proceeds where no report of Apple's covers a row: the operator's tax table and programme
/// periods, Apple's commission rules, and unknown rather than a guess.
@Suite struct ProceedsEstimateTests {
    static let rules = ProceedsRules(
        taxRates: [.init(country: "FR", validFrom: "2000-01-01", share: "0.1667"), .init(country: "US", validFrom: "2000-01-01", share: "0"),
                   .init(country: "FR", validFrom: "2026-11-10", share: "0.2")],
        smallBusiness: [.init(validFrom: "2026-11-20", validTo: "2026-12-01")]
    )

    static func group(_ storefront: String?, _ price: String?, units: Int = 2, day: String = "2026-11-02", refund: Bool = false,
                      pastAYear: Int = 0) -> LedgerSalesGroup {
        LedgerSalesGroup(grain: .init(day: day, productId: "pro", storefront: storefront, currency: "EUR", price: price, refund: refund, sandbox: false),
                         units: units, amount: nil, freeTrial: false, prorated: 0, pastAYearUnits: pastAYear)
    }

    @Test func theStandardCommissionIsTakenFromThePriceNetOfTheCountrysTax() throws {
        // 5.49 × (1 − 0.1667) = 4.5748…, × 0.70 = 3.2024 → 3.20 a unit.
        let estimate = try #require(Self.rules.estimate(Self.group("FRA", "5.49")))
        #expect(estimate.amount == Decimal(string: "6.40") && estimate.source == .standard)
        let refund = try #require(Self.rules.estimate(Self.group("FRA", "5.49", units: 1, refund: true)))
        #expect(refund.amount == Decimal(string: "-3.20"))
        // From 10 November, 20 %: 5.49 × 0.8 × 0.7 = 3.0744 → 3.07.
        #expect(Self.rules.estimate(Self.group("FRA", "5.49", units: 1, day: "2026-11-12"))?.amount == Decimal(string: "3.07"))
    }

    @Test func theReducedCommissionAppliesInTheProgrammeAndToRenewalsPastAYear() throws {
        let programme = try #require(Self.rules.estimate(Self.group("USA", "9.99", units: 1, day: "2026-11-25")))
        #expect(programme.amount == Decimal(string: "8.49") && programme.source == .smallBusiness)  // 9.99 × 0.85 = 8.4915
        let mixed = try #require(Self.rules.estimate(Self.group("USA", "9.99", units: 3, pastAYear: 1)))
        #expect(mixed.amount == Decimal(string: "22.47") && mixed.source == .standardAndAfterOneYear)  // 2 × 6.99 + 8.49
    }

    @Test func withoutACountryItsTaxOrAPriceTheProceedsAreUnknown() {
        #expect(Self.rules.estimate(Self.group(nil, "0.99")) == nil)
        #expect(Self.rules.estimate(Self.group("JPN", "160")) == nil)
        #expect(Self.rules.estimate(Self.group("USA", nil)) == nil)
    }

    @Test func aRowWithoutAReportLineIsEstimatedAndSaysSo() {
        let result = Reconciliation.compare(app: "com.example", days: ["2026-11-02"], timeZone: "UTC", reports: [:],
                                            ledger: [Self.group("FRA", "5.49")], products: ["pro"], rules: Self.rules)
        #expect(result.rows.first?.ledgerProceeds == "6.4" && result.rows.first?.proceedsSource == .standard)
        let unknown = Reconciliation.compare(app: "com.example", days: ["2026-11-02"], timeZone: "UTC", reports: [:],
                                             ledger: [Self.group("JPN", "160")], products: ["pro"], rules: Self.rules)
        #expect(unknown.rows.first?.ledgerProceeds == nil && unknown.rows.first?.proceedsSource == .unknown)
    }
}
