import Foundation
import LedgerDomain
import LedgerProjections

/// What the store tells of an audit row (or a group of rows) beyond its columns, for its proceeds.
public struct ProceedsBasis: Sendable, Hashable {
    /// `yyyy-MM-dd` of the row's time in the app's reporting time zone: the day of Apple's report
    /// that would hold it.
    public let reportingDay: String
    /// An auto-renewable subscription's payment after the subscriber's first year of paid service
    /// (Apple's reduced commission): days of paid periods before it, free periods and refunded
    /// periods left out, a lapse longer than 60 days starting the count again.
    public let pastAYear: Bool

    public init(reportingDay: String, pastAYear: Bool) {
        self.reportingDay = reportingDay
        self.pastAYear = pastAYear
    }
}

/// The developer's proceeds of the audit trail's money rows, each with where they come from:
/// Apple's per-unit proceeds of the matching line of its report of the row's reporting day
/// (product, country, customer currency, customer price, sale or refund; a renewal past a year
/// takes the `Rate After One Year` line where there is one), else the estimate of `ProceedsRules`,
/// else unknown. A row's proceeds have the sign of its amount (a refund's are what it gave back)
/// and their own currency: Apple's proceeds currency, or for an estimate the customer currency.
public struct AuditProceeds: Sendable {
    let settings: any ReportSettings
    let reported: ReportedProceeds

    public init(settings: any ReportSettings, reported: ReportedProceeds) {
        self.settings = settings
        self.reported = reported
    }

    /// What one row, or one group of rows that share everything proceeds depend on, carries.
    struct Item {
        let basis: ProceedsBasis
        let productId: String
        let storefront: String?
        let currency: String?
        let price: String?
        let quantity: Int
        let amount: String?
        let refund: Bool
        let sandbox: Bool
    }

    struct Found: Hashable {
        let amount: Decimal
        let currency: String
        let source: ProceedsRules.Source
    }

    /// The rows with their proceeds.
    public func fill(_ rows: [AuditRow], app: String) async throws -> [AuditRow] {
        guard rows.contains(where: { $0.basis != nil }) else { return rows }
        async let rules = settings.rules(app: app)
        async let days = reported.days(app: app)
        let (estimates, reportedDays) = try await (rules, days)
        return rows.map { row in
            guard let basis = row.basis else { return row }
            var row = row
            let item = Item(basis: basis, productId: row.productId, storefront: row.storefront, currency: row.currency, price: row.price,
                            quantity: row.quantity, amount: row.amount, refund: row.event.moneyDirection == .givenBack,
                            sandbox: row.environment == .sandbox)
            if let found = Self.proceeds(of: item, rules: estimates, reported: reportedDays) {
                row.proceeds = DecimalText.format(found.amount)
                row.proceedsCurrency = found.currency
                row.proceedsSource = found.source
            } else {
                row.proceedsSource = .unknown
            }
            return row
        }
    }

    /// The summary's rows from its parts: counts and money added per group and currency, proceeds
    /// added per proceeds currency (a group whose rows Apple pays in two currencies is two rows).
    public func summarize(_ parts: [AuditSummaryPart], app: String) async throws -> [AuditSummaryRow] {
        async let rules = settings.rules(app: app)
        async let days = reported.days(app: app)
        let (estimates, reportedDays) = try await (rules, days)
        struct Key: Hashable {
            let day, productId, currency: String?
            let environment: StoreEnvironment?
            let storefront, proceedsCurrency: String?
        }
        struct Total {
            var purchases = 0, units = 0, refunds = 0, refundedUnits = 0, unpriced = 0, proceedsUnknown = 0
            var gross = Decimal(0), refunded = Decimal(0), proceeds = Decimal(0), refundedProceeds = Decimal(0)
            var known = false
            var sources: Set<ProceedsRules.Source> = []
        }
        var totals: [Key: Total] = [:]
        for part in parts {
            let refund = part.refunds > 0
            let found = Self.proceeds(of: Item(
                basis: part.basis, productId: part.basisProductId, storefront: part.basisStorefront, currency: part.currency, price: part.price,
                quantity: refund ? part.refundedUnits : part.units, amount: refund ? part.refundedAmount : part.gross, refund: refund,
                sandbox: part.sandbox
            ), rules: estimates, reported: reportedDays)
            let moneyRows = part.purchases + part.refunds
            let key = Key(day: part.day, productId: part.productId, currency: part.currency, environment: part.environment,
                          storefront: part.storefront, proceedsCurrency: found?.currency ?? part.currency)
            var total = totals[key] ?? Total()
            total.purchases += part.purchases
            total.units += part.units
            total.refunds += part.refunds
            total.refundedUnits += part.refundedUnits
            total.unpriced += part.unpriced
            total.gross += DecimalText.parse(part.gross) ?? 0
            total.refunded += DecimalText.parse(part.refundedAmount) ?? 0
            if let found, moneyRows > 0 {
                total.known = true
                total.sources.insert(found.source)
                if refund { total.refundedProceeds += found.amount } else { total.proceeds += found.amount }
            } else {
                total.proceedsUnknown += moneyRows
            }
            totals[key] = total
        }
        let rows = totals.map { key, total in
            let sources = total.sources.count > 1 ? total.sources.subtracting([.free]) : total.sources
            let source: ProceedsRules.Source = !total.known ? .unknown : sources.count == 1 ? sources.first! : .mixed
            return AuditSummaryRow(
                day: key.day, productId: key.productId, currency: key.currency, environment: key.environment, storefront: key.storefront,
                purchases: total.purchases, units: total.units, gross: DecimalText.format(total.gross), refunds: total.refunds,
                refundedUnits: total.refundedUnits, refundedAmount: DecimalText.format(total.refunded),
                net: DecimalText.format(total.gross - total.refunded), unpriced: total.unpriced,
                proceeds: total.known ? DecimalText.format(total.proceeds) : nil,
                refundedProceeds: total.known ? DecimalText.format(total.refundedProceeds) : nil,
                netProceeds: total.known ? DecimalText.format(total.proceeds - total.refundedProceeds) : nil,
                proceedsCurrency: total.known ? key.proceedsCurrency : nil, proceedsSource: source, proceedsUnknown: total.proceedsUnknown
            )
        }
        return rows.sorted { lhs, rhs in
            let left = [lhs.day, lhs.productId, lhs.currency, lhs.environment?.rawValue, lhs.storefront, lhs.proceedsCurrency]
            let right = [rhs.day, rhs.productId, rhs.currency, rhs.environment?.rawValue, rhs.storefront, rhs.proceedsCurrency]
            for (one, other) in zip(left, right) where one != other {
                // nil last, as SQL's ORDER BY puts NULLs
                guard let one else { return false }
                guard let other else { return true }
                return one < other
            }
            return false
        }
    }

    /// The proceeds of an item, or nil when unknown.
    static func proceeds(of item: Item, rules: ProceedsRules, reported: [String: ReportedProceeds.Day]) -> Found? {
        guard let amount = DecimalText.parse(item.amount), let currency = item.currency else { return nil }
        if amount == 0 { return Found(amount: 0, currency: currency, source: .free) }
        guard let price = DecimalText.parse(item.price), price > 0,
              let country = item.storefront.flatMap(CountryCodes.alpha2(fromAlpha3:))
        else { return nil }
        // Per unit to the row: whole units at the unit price, else (a prorated refund, Apple's
        // price of a whole quantity) in proportion to the row's amount, to the cent.
        func scaled(_ perUnit: Decimal, in proceedsCurrency: String) -> Decimal {
            amount == price * Decimal(item.quantity) ? perUnit * Decimal(item.quantity)
                : ProceedsRules.rounded(amount * perUnit / price, places: ProceedsRules.minorUnits(of: proceedsCurrency))
        }
        if !item.sandbox {
            let line = ReportedProceeds.Line(sku: item.productId, country: country, currency: currency, price: DecimalText.format(price),
                                             refund: item.refund)
            if let rates = reported[item.basis.reportingDay]?[line], let rate = rates.first(where: { $0.afterOneYear == item.basis.pastAYear }) ?? rates.first {
                return Found(amount: scaled(rate.perUnit, in: rate.currency), currency: rate.currency, source: .appleReport)
            }
        }
        guard let estimate = rules.unitEstimate(price: price, currency: currency, country: country, day: item.basis.reportingDay, pastAYear: item.basis.pastAYear)
        else { return nil }
        return Found(amount: scaled(estimate.amount, in: currency), currency: currency, source: estimate.source)
    }
}
