import Foundation
import LedgerDomain

/// How the ledger estimates a developer's proceeds where no report of Apple's covers a sale: the
/// operator's tax table (`ledger reports tax-rate`) and the app's App Store Small Business Program
/// periods (`ledger reports small-business`), with Apple's commission rules.
///
/// Apple keeps a commission of the customer price net of tax: 30 % as standard, 15 % for an app in
/// the Small Business Program, and 15 % for an auto-renewable subscription's renewals once the
/// subscriber has a year of paid service. Estimated proceeds per unit are
/// `price × (1 − tax share) × (1 − commission)`, rounded to the currency's minor unit as Apple's reports are; without a
/// tax rate for the buyer's country (or a country at all) the proceeds are unknown.
public struct ProceedsRules: Sendable, Hashable, Codable {
    /// The share of a customer price that is tax in a country, from a day on.
    public struct TaxRate: Sendable, Hashable, Codable {
        /// ISO 3166-1 alpha-2.
        public let country: String
        /// `yyyy-MM-dd`.
        public let validFrom: String
        /// Decimal text in [0, 1): 0.1667 for a price that includes 20 % VAT.
        public let share: String

        public init(country: String, validFrom: String, share: String) {
            self.country = country
            self.validFrom = validFrom
            self.share = share
        }
    }

    /// Days `[validFrom, validTo)` (`yyyy-MM-dd`) the app was in the Small Business Program.
    public struct Period: Sendable, Hashable, Codable {
        public let validFrom: String
        public let validTo: String?

        public init(validFrom: String, validTo: String?) {
            self.validFrom = validFrom
            self.validTo = validTo
        }

        func contains(_ day: String) -> Bool { day >= validFrom && validTo.map { day < $0 } ?? true }
    }

    /// How a row's proceeds were found.
    public enum Source: String, Sendable, Hashable, Codable {
        /// Apple's report of the day, per-unit proceeds of the matching line.
        case appleReport = "apple_report"
        /// 70 % of the price net of tax.
        case standard = "estimate:standard"
        /// 85 %: the app was in the Small Business Program that day.
        case smallBusiness = "estimate:small_business"
        /// 85 %: renewals past a year of the subscriber's paid service.
        case afterOneYear = "estimate:after_one_year"
        /// Both standard and after-one-year renewals.
        case standardAndAfterOneYear = "estimate:standard+after_one_year"
        /// No money moved (units at price zero, a free trial period, a family revocation): no proceeds.
        case free
        /// Rows of several sources.
        case mixed
        /// No report, and no tax rate for the country (or no country, or no price).
        case unknown
    }

    public static let standardShare = Decimal(string: "0.70")!
    public static let reducedShare = Decimal(string: "0.85")!

    public var taxRates: [TaxRate]
    public var smallBusiness: [Period]

    public init(taxRates: [TaxRate] = [], smallBusiness: [Period] = []) {
        self.taxRates = taxRates
        self.smallBusiness = smallBusiness
    }

    /// The tax share of a country on a day: the latest rate in force.
    public func taxShare(country: String, day: String) -> Decimal? {
        taxRates.filter { $0.country == country && $0.validFrom <= day }.max { $0.validFrom < $1.validFrom }.flatMap { DecimalText.parse($0.share) }
    }

    public func inSmallBusiness(on day: String) -> Bool {
        smallBusiness.contains { $0.contains(day) }
    }

    /// The estimated proceeds of one unit sold at `price` in `country` (ISO 3166-1 alpha-2) on
    /// reporting day `day`, and the rule that gives them; nil (unknown) without the country's tax rate.
    /// Rounded to the currency's minor unit (cents; whole yen or won).
    public func unitEstimate(price: Decimal, currency: String?, country: String, day: String, pastAYear: Bool) -> (amount: Decimal, source: Source)? {
        if price == 0 { return (0, .free) }
        guard let tax = taxShare(country: country, day: day) else { return nil }
        let net = price * (1 - tax)
        let places = Self.minorUnits(of: currency)
        if inSmallBusiness(on: day) { return (Self.rounded(net * Self.reducedShare, places: places), .smallBusiness) }
        return pastAYear ? (Self.rounded(net * Self.reducedShare, places: places), .afterOneYear)
            : (Self.rounded(net * Self.standardShare, places: places), .standard)
    }

    /// ISO 4217 currencies without a minor unit (amounts in whole units).
    static let wholeUnitCurrencies: Set<String> = [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF",
    ]

    /// Decimal places of a currency's amounts: 0 for the whole-unit ones, else 2.
    static func minorUnits(of currency: String?) -> Int16 {
        currency.map { wholeUnitCurrencies.contains($0) } == true ? 0 : 2
    }

    /// The estimated proceeds of a ledger group (negative for refunds) and their source; nil
    /// (unknown) without a price, a country or its tax rate.
    func estimate(_ group: LedgerSalesGroup) -> (amount: Decimal, source: Source)? {
        if let price = DecimalText.parse(group.grain.price), price == 0 { return (0, .free) }
        guard let price = DecimalText.parse(group.grain.price),
              let country = group.grain.storefront.flatMap(CountryCodes.alpha2(fromAlpha3:)),
              let standard = unitEstimate(price: price, currency: group.grain.currency, country: country, day: group.grain.day, pastAYear: false),
              let reduced = unitEstimate(price: price, currency: group.grain.currency, country: country, day: group.grain.day, pastAYear: true)
        else { return nil }
        let pastAYear = min(group.pastAYearUnits, group.units)
        let total = standard.amount * Decimal(group.units - pastAYear) + reduced.amount * Decimal(pastAYear)
        let source: Source = standard.source == .smallBusiness ? .smallBusiness
            : pastAYear == 0 ? .standard : pastAYear == group.units ? .afterOneYear : .standardAndAfterOneYear
        return (group.grain.refund ? -total : total, source)
    }

    /// Half up, as Apple's reports round money.
    static func rounded(_ value: Decimal, places: Int16) -> Decimal {
        var value = value
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, Int(places), .plain)
        return rounded
    }
}

/// The operator's settings for an app's reports, kept in the database: the proceeds rules and
/// the reports' time zone.
public protocol ReportSettings: Sendable {
    func rules(app: String) async throws -> ProceedsRules
    /// The app's reporting time zone (an IANA name), nil when none is set.
    func reportingTimeZone(app: String) async throws -> String?
}
