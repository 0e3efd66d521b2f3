import Foundation
@testable import LedgerApplication
import LedgerDomain
import Testing

/// Each audit row's proceeds, without a database: Apple's line where its report has one, else a
/// named estimate, else unknown; worked out here by hand from Apple's figures and the rules.
@Suite struct AuditProceedsTests {
    static let rules = ProceedsRules(
        taxRates: [.init(country: "FR", validFrom: "2000-01-01", share: "0.1667"), .init(country: "US", validFrom: "2000-01-01", share: "0"),
                   .init(country: "JP", validFrom: "2000-01-01", share: "0.0909")]
    )

    static func line(_ sku: String, units: Int, price: String, proceeds: String, country: String = "US", currency: String = "USD",
                     proceedsCurrency: String? = nil, reason: String? = nil) -> SalesReportLine {
        SalesReportLine(sku: sku, title: sku, productTypeIdentifier: "IAY", units: String(units), developerProceeds: proceeds,
                        customerPrice: units < 0 ? "-" + price : price, customerCurrency: currency, proceedsCurrency: proceedsCurrency ?? currency,
                        countryCode: country, beginDate: "11/02/2026", endDate: "11/02/2026", appleIdentifier: "1", proceedsReason: reason)
    }

    static let reported: [String: ReportedProceeds.Day] = [
        "2026-11-02": ReportedProceeds.index([
            line("coins", units: 5, price: "0.99", proceeds: "0.69"),
            line("coins", units: -1, price: "0.99", proceeds: "0.69"),
            line("pro", units: 2, price: "9.99", proceeds: "6.99"),
            line("pro", units: 1, price: "9.99", proceeds: "8.49", reason: "Rate After One Year"),
            // Apple pays this storefront in another currency than the customer's.
            line("coins", units: 1, price: "1.09", proceeds: "0.70", country: "ME", currency: "EUR", proceedsCurrency: "USD"),
        ]),
    ]

    static func proceeds(_ product: String = "coins", storefront: String? = "USA", currency: String = "USD", price: String? = "0.99",
                         quantity: Int = 1, amount: String? = nil, refund: Bool = false, day: String = "2026-11-02", pastAYear: Bool = false,
                         sandbox: Bool = false) -> AuditProceeds.Found? {
        let whole = price.map { DecimalText.format(Decimal(string: $0)! * Decimal(quantity)) }
        return AuditProceeds.proceeds(of: .init(
            basis: ProceedsBasis(reportingDay: day, pastAYear: pastAYear), productId: product, storefront: storefront, currency: currency,
            price: price, quantity: quantity, amount: amount ?? whole, refund: refund, sandbox: sandbox
        ), rules: rules, reported: reported)
    }

    @Test func aRowApplesReportCoversTakesItsPerUnitProceedsInApplesCurrency() {
        #expect(Self.proceeds(quantity: 3) == .init(amount: Decimal(string: "2.07")!, currency: "USD", source: .appleReport))
        #expect(Self.proceeds(refund: true) == .init(amount: Decimal(string: "0.69")!, currency: "USD", source: .appleReport))
        #expect(Self.proceeds(storefront: "MNE", currency: "EUR", price: "1.09") == .init(amount: Decimal(string: "0.70")!, currency: "USD", source: .appleReport),
                "Apple's proceeds currency, not the customer's")
        // A renewal past a year takes the line at the reduced rate, a first year's the standard one.
        #expect(Self.proceeds("pro", price: "9.99", pastAYear: true)?.amount == Decimal(string: "8.49"))
        #expect(Self.proceeds("pro", price: "9.99", pastAYear: false)?.amount == Decimal(string: "6.99"))
    }

    @Test func aProratedRefundGivesBackItsShareOfTheProceeds() {
        // 40 % of a 0.99 coin refunded, the row's amount 0.40; Apple's refund line: 0.69 a unit → 0.69 × 0.40 / 0.99 = 0.2788 → 0.28.
        #expect(Self.proceeds(amount: "0.40", refund: true) == .init(amount: Decimal(string: "0.28")!, currency: "USD", source: .appleReport))
        // 40 % of a 9.99 subscription, 4.00; no refund line of pro that day: the standard estimate 9.99 × 0.70 = 6.993 → 6.99 a unit,
        // × 4.00 / 9.99 = 2.7988 → 2.80.
        #expect(Self.proceeds("pro", price: "9.99", amount: "4.00", refund: true)
            == .init(amount: Decimal(string: "2.80")!, currency: "USD", source: .standard))
    }

    @Test func withoutALineTheEstimateNamesItsRuleAndRoundsToTheCurrencysUnit() {
        // No report of the 3rd: France's VAT share 0.1667 out of 5.49 → 4.5748 × 0.70 = 3.2024 → 3.20 a unit.
        #expect(Self.proceeds(storefront: "FRA", currency: "EUR", price: "5.49", quantity: 2, day: "2026-11-03")
            == .init(amount: Decimal(string: "6.40")!, currency: "EUR", source: .standard))
        // Yen have no minor unit: 160 × (1 − 0.0909) × 0.70 = 101.8192 → 102.
        #expect(Self.proceeds(storefront: "JPN", currency: "JPY", price: "160", day: "2026-11-03")
            == .init(amount: 102, currency: "JPY", source: .standard))
        #expect(Self.proceeds("pro", price: "9.99", day: "2026-11-03", pastAYear: true)
            == .init(amount: Decimal(string: "8.49")!, currency: "USD", source: .afterOneYear))
        // Sandbox rows are never in Apple's reports: estimated even where a line would match.
        #expect(Self.proceeds(sandbox: true)?.source == .standard)
    }

    @Test func whatCannotBeKnownIsUnknownAndNoMoneyIsFree() {
        #expect(Self.proceeds(storefront: "DEU", currency: "EUR", price: "1.09", day: "2026-11-03") == nil, "no German tax rate")
        #expect(Self.proceeds(storefront: nil, day: "2026-11-03") == nil, "a verifyReceipt row names no country")
        #expect(Self.proceeds(price: nil) == nil, "unpriced")
        #expect(Self.proceeds(price: "0") == .init(amount: 0, currency: "USD", source: .free), "a free trial period")
        #expect(Self.proceeds(amount: "0", refund: true)?.source == .free, "a family revocation gives back nothing")
    }
}
