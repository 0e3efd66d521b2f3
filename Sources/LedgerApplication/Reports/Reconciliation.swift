import Foundation
import LedgerDomain

/// The ledger's sales beside Apple's Summary Sales Reports, at Apple's grain: per reporting day,
/// product, country, customer currency and customer price, the units and money each side counts,
/// and every difference with what the ledger can say of it.
///
/// Built by `Reconciliation.compare` from the latest report of each day and the ledger's audit
/// rows (production only: Apple's reports never hold the sandbox). Pure: the use case
/// (`ReconcileSalesReports`) reads both sides and adds the drill-down.
public struct Reconciliation: Sendable, Hashable, Codable {
    /// What one side counts at one grain.
    public struct Figures: Sendable, Hashable, Codable {
        public var unitsSold = 0
        public var unitsRefunded = 0
        /// Customer price × units, in the row's currency.
        public var amountSold = "0"
        public var amountRefunded = "0"

        public init() {}
    }

    /// Why the two sides differ, for some units of a row.
    public struct Explanation: Sendable, Hashable, Codable {
        public enum Code: String, Sendable, Hashable, Codable, CaseIterable {
            /// Apple sold units the ledger never recorded: no post, no notification. Backfill.
            case notInLedger = "not_in_ledger"
            /// Apple refunded units the ledger does not know refunded.
            case refundNotInLedger = "refund_not_in_ledger"
            /// The ledger holds sales Apple's report of that day does not.
            case notInReport = "not_in_report"
            /// The ledger holds refunds Apple's report of that day does not.
            case refundNotInReport = "refund_not_in_report"
            /// The same sales on a neighbouring day of the other side (a purchase near midnight
            /// of the reporting time zone, a refund Apple booked when it processed it).
            case otherDay = "other_day"
            /// The same units at another price on the other side.
            case priceDiffers = "price_differs"
            /// The same units, another amount (a prorated refund).
            case amountDiffers = "amount_differs"
            /// Ledger rows from verifyReceipt receipts, which carry no country, matched at day,
            /// product, currency and price.
            case noCountry = "no_country"
            /// Units at price zero (free trials, offer codes) only one side counts.
            case freeUnits = "free_units"
            /// No report of that day is imported.
            case noReport = "no_report"
            /// Apple reports a product this app's catalog does not name and the ledger never saw:
            /// another app of the vendor, or a product to add to the catalog.
            case unknownProduct = "unknown_product"

            /// Differences that are expected and need nothing done.
            var isBenign: Bool { [.otherDay, .noCountry, .freeUnits].contains(self) }
        }

        public let code: Code
        public let units: Int
        public let message: String
    }

    /// One grain, both sides.
    public struct Row: Sendable, Hashable, Codable {
        public enum Status: String, Sendable, Hashable, Codable {
            /// Both sides count the same units and money.
            case matched
            /// They differ, and every difference is one the ledger expects (`Explanation.Code.isBenign`).
            case explained
            /// They differ in a way someone should look at.
            case differs
        }

        public let day: String
        public let productId: String
        /// ISO 3166-1 alpha-2; nil for the ledger's rows that have no country.
        public let country: String?
        public let currency: String?
        /// Customer price per unit.
        public let price: String?
        public internal(set) var apple = Figures()
        public internal(set) var ledger = Figures()
        /// Apple's proceeds of the row (per-unit proceeds × units, refunds subtracted).
        public internal(set) var appleProceeds: String?
        public internal(set) var proceedsCurrency: String?
        /// The developer's proceeds of the ledger's rows (refunds subtracted): from Apple's report
        /// of the day where it has the row, else estimated (`ProceedsRules`); nil when unknown.
        public internal(set) var ledgerProceeds: String?
        public internal(set) var ledgerProceedsCurrency: String?
        /// Where `ledgerProceeds` comes from; nil for a row the ledger has no units of.
        public internal(set) var proceedsSource: ProceedsRules.Source?
        public internal(set) var status = Status.matched
        public internal(set) var explanations: [Explanation] = []
        /// The ledger's transactions behind a row that differs (at most 50), for the drill-down.
        public internal(set) var transactions: [String] = []
    }

    /// One reporting day.
    public struct Day: Sendable, Hashable, Codable {
        public let day: String
        /// The content hash of the report read, nil when none is imported.
        public let report: String?
        public let rows: Int
        public let differing: Int
    }

    public let app: String
    public let from: String
    public let to: String
    public let timeZone: String
    public internal(set) var rows: [Row]
    public let days: [Day]
    /// Sandbox units the ledger holds in the period: never in Apple's reports, never compared.
    public let sandboxUnits: Int
}

extension Reconciliation {
    /// Grain key of a row.
    struct Key: Hashable, Comparable {
        let day: String
        let productId: String
        let country: String?
        let currency: String?
        let price: String?

        static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.day, lhs.productId, lhs.country ?? "", lhs.currency ?? "", lhs.price ?? "")
                < (rhs.day, rhs.productId, rhs.country ?? "", rhs.currency ?? "", rhs.price ?? "")
        }
    }

    /// Units of a row not yet explained, per side and kind.
    struct Open {
        var ledgerSold = 0
        var appleSold = 0
        var ledgerRefunded = 0
        var appleRefunded = 0
    }

    /// Compares the latest report of each day of `days` with the ledger's groups.
    ///
    /// `reports` holds the latest report per day (absent days have none imported); `products` the
    /// product ids the app's catalog names.
    public static func compare(
        app: String, days: [String], timeZone: String, reports: [String: SalesReportReceived],
        ledger groups: [LedgerSalesGroup], products: Set<String>, rules: ProceedsRules = ProceedsRules()
    ) -> Reconciliation {
        var rows: [Key: Row] = [:]
        var proceeds: [Key: Decimal] = [:]
        /// Apple's per-unit proceeds and their currency at a grain, sales and refunds apart: units and their proceeds.
        struct UnitProceeds { var units = 0; var total = Decimal(0); var currency = "" }
        var reportedProceeds: [Key: [Bool: UnitProceeds]] = [:]
        var ledgerGroups: [Key: [LedgerSalesGroup]] = [:]
        var open: [Key: Open] = [:]
        var freeTrial: Set<Key> = []
        var prorated: [Key: Int] = [:]
        func row(_ key: Key) -> Row {
            rows[key] ?? Row(day: key.day, productId: key.productId, country: key.country, currency: key.currency, price: key.price)
        }

        for day in days {
            for line in reports[day]?.lines ?? [] {
                guard let units = Int(line.units), let price = DecimalText.parse(line.customerPrice) else { continue }
                let unitPrice = price < 0 ? -price : price
                let key = Key(day: day, productId: line.sku, country: line.countryCode, currency: line.customerCurrency,
                              price: DecimalText.format(unitPrice))
                var entry = row(key)
                let amount = unitPrice * Decimal(abs(units))
                if units >= 0 {
                    entry.apple.unitsSold += units
                    entry.apple.amountSold = add(entry.apple.amountSold, amount)
                } else {
                    entry.apple.unitsRefunded -= units
                    entry.apple.amountRefunded = add(entry.apple.amountRefunded, amount)
                }
                if let perUnit = DecimalText.parse(line.developerProceeds) {
                    proceeds[key, default: 0] += perUnit * Decimal(units)
                    entry.proceedsCurrency = line.proceedsCurrency
                    var unit = reportedProceeds[key]?[units < 0] ?? UnitProceeds()
                    unit.units += abs(units)
                    unit.total += perUnit * Decimal(abs(units))
                    unit.currency = line.proceedsCurrency
                    reportedProceeds[key, default: [:]][units < 0] = unit
                }
                rows[key] = entry
            }
        }
        var sandboxUnits = 0
        for group in groups {
            guard !group.grain.sandbox else {
                sandboxUnits += group.units
                continue
            }
            let country = group.grain.storefront.flatMap(CountryCodes.alpha2(fromAlpha3:))
            let key = Key(day: group.grain.day, productId: group.grain.productId, country: country, currency: group.grain.currency,
                          price: group.grain.price.map(DecimalText.canonical))
            var entry = row(key)
            let amount = DecimalText.parse(group.amount) ?? 0
            if group.grain.refund {
                entry.ledger.unitsRefunded += group.units
                entry.ledger.amountRefunded = add(entry.ledger.amountRefunded, amount)
                prorated[key, default: 0] += group.prorated
            } else {
                entry.ledger.unitsSold += group.units
                entry.ledger.amountSold = add(entry.ledger.amountSold, amount)
            }
            if group.freeTrial { freeTrial.insert(key) }
            ledgerGroups[key, default: []].append(group)
            rows[key] = entry
        }
        for (key, entry) in rows {
            open[key] = Open(
                ledgerSold: max(entry.ledger.unitsSold - entry.apple.unitsSold, 0), appleSold: max(entry.apple.unitsSold - entry.ledger.unitsSold, 0),
                ledgerRefunded: max(entry.ledger.unitsRefunded - entry.apple.unitsRefunded, 0),
                appleRefunded: max(entry.apple.unitsRefunded - entry.ledger.unitsRefunded, 0)
            )
        }
        func explain(_ key: Key, _ code: Explanation.Code, _ units: Int, _ message: String) {
            rows[key]?.explanations.append(Explanation(code: code, units: units, message: message))
        }
        let keys = rows.keys.sorted()

        // Rows that can explain each other share a bucket: looking only inside it keeps the
        // comparison linear in the rows, whatever the period.
        func buckets<Bucket: Hashable>(_ bucket: (Key) -> Bucket) -> [Bucket: [Key]] {
            Dictionary(grouping: keys, by: bucket)
        }
        struct SamePrice: Hashable { let day: String?; let productId: String; let country: String?; let currency: String?; let price: String? }

        // Rows without a country (verifyReceipt) against Apple's rows of the same day, product,
        // currency and price that the ledger lacks.
        let byDayAndPrice = buckets { SamePrice(day: $0.day, productId: $0.productId, country: nil, currency: $0.currency, price: $0.price) }
        for key in keys where key.country == nil {
            for other in byDayAndPrice[SamePrice(day: key.day, productId: key.productId, country: nil, currency: key.currency, price: key.price)] ?? []
            where other.country != nil {
                for refund in [false, true] {
                    let taken = min(refund ? open[key]!.ledgerRefunded : open[key]!.ledgerSold,
                                    refund ? open[other]!.appleRefunded : open[other]!.appleSold)
                    guard taken > 0 else { continue }
                    if refund { open[key]!.ledgerRefunded -= taken; open[other]!.appleRefunded -= taken }
                    else { open[key]!.ledgerSold -= taken; open[other]!.appleSold -= taken }
                    let what = refund ? "refund(s)" : "sale(s)"
                    explain(key, .noCountry, taken, "\(taken) \(what) from verifyReceipt receipts, which name no country, are Apple's in \(other.country!)")
                    explain(other, .noCountry, taken, "\(taken) \(what) the ledger holds from verifyReceipt receipts, which name no country: matched by day, product and price")
                }
            }
        }

        // The same units on a neighbouring day (sales), or any day of the period (refunds); only
        // between days whose reports are both imported.
        let byPrice = buckets { SamePrice(day: nil, productId: $0.productId, country: $0.country, currency: $0.currency, price: $0.price) }
        for key in keys where reports[key.day] != nil && (open[key]!.ledgerSold > 0 || open[key]!.ledgerRefunded > 0) {
            for other in byPrice[SamePrice(day: nil, productId: key.productId, country: key.country, currency: key.currency, price: key.price)] ?? []
            where other != key && reports[other.day] != nil {
                let sold = min(open[key]!.ledgerSold, open[other]!.appleSold)
                if sold > 0, Self.daysApart(key.day, other.day) == 1 {
                    open[key]!.ledgerSold -= sold
                    open[other]!.appleSold -= sold
                    explain(key, .otherDay, sold, "\(sold) sale(s) Apple reports on \(other.day): the purchase time falls on \(key.day) in \(timeZone)")
                    explain(other, .otherDay, sold, "\(sold) sale(s) the ledger dates \(key.day) in \(timeZone): near the day's edge")
                }
                let refunded = min(open[key]!.ledgerRefunded, open[other]!.appleRefunded)
                if refunded > 0 {
                    open[key]!.ledgerRefunded -= refunded
                    open[other]!.appleRefunded -= refunded
                    explain(key, .otherDay, refunded, "\(refunded) refund(s) Apple reports on \(other.day), the ledger on \(key.day) (Apple's cancellation date)")
                    explain(other, .otherDay, refunded, "\(refunded) refund(s) the ledger dates \(key.day) (Apple's cancellation date)")
                }
            }
        }

        // The same units at another price.
        let byDay = buckets { SamePrice(day: $0.day, productId: $0.productId, country: $0.country, currency: $0.currency, price: nil) }
        for key in keys where open[key]!.ledgerSold > 0 {
            for other in byDay[SamePrice(day: key.day, productId: key.productId, country: key.country, currency: key.currency, price: nil)] ?? []
            where other != key {
                let sold = min(open[key]!.ledgerSold, open[other]!.appleSold)
                guard sold > 0 else { continue }
                open[key]!.ledgerSold -= sold
                open[other]!.appleSold -= sold
                explain(key, .priceDiffers, sold, "\(sold) sale(s) at \(key.price ?? "no price") in the ledger, at \(other.price ?? "no price") in Apple's report")
                explain(other, .priceDiffers, sold, "\(sold) sale(s) Apple reports at \(other.price ?? "no price"), the ledger at \(key.price ?? "no price")")
            }
        }

        // What is left.
        for key in keys {
            let left = open[key]!
            let reported = reports[key.day] != nil
            let isFree = DecimalText.parse(key.price) == 0
            if left.appleSold > 0 {
                if !products.contains(key.productId) && rows[key]!.ledger.unitsSold == 0 && rows[key]!.ledger.unitsRefunded == 0 {
                    explain(key, .unknownProduct, left.appleSold, "\(key.productId) is not in this app's catalog and the ledger never saw it: another app of the vendor, or a product to define")
                } else if isFree {
                    explain(key, .freeUnits, left.appleSold, "\(left.appleSold) unit(s) at price zero only Apple counts")
                } else {
                    explain(key, .notInLedger, left.appleSold, "\(left.appleSold) sale(s) Apple reports that the ledger never recorded (no post, no notification): `ledger appstore sync`, then a backfill of the users who bought")
                }
            }
            if left.appleRefunded > 0 {
                explain(key, .refundNotInLedger, left.appleRefunded, "\(left.appleRefunded) refund(s) Apple reports that the ledger has not recorded: `ledger appstore sync` recovers Apple's REFUND notifications")
            }
            if left.ledgerSold > 0 {
                if !reported {
                    explain(key, .noReport, left.ledgerSold, "no report of \(key.day) is imported: `ledger reports import`")
                } else if isFree || freeTrial.contains(key) {
                    explain(key, .freeUnits, left.ledgerSold, "\(left.ledgerSold) unit(s) at price zero (free trials) Apple's sales report does not count")
                } else {
                    explain(key, .notInReport, left.ledgerSold, "\(left.ledgerSold) sale(s) the ledger holds that Apple's report of \(key.day) does not: look at the transactions below")
                }
            }
            if left.ledgerRefunded > 0 {
                if !reported {
                    explain(key, .noReport, left.ledgerRefunded, "no report of \(key.day) is imported")
                } else {
                    explain(key, .refundNotInReport, left.ledgerRefunded, "\(left.ledgerRefunded) refund(s) the ledger holds that Apple's report of \(key.day) does not")
                }
            }
            var entry = rows[key]!
            let sameUnits = entry.apple.unitsSold == entry.ledger.unitsSold && entry.apple.unitsRefunded == entry.ledger.unitsRefunded
            if sameUnits, DecimalText.parse(entry.apple.amountRefunded) != DecimalText.parse(entry.ledger.amountRefunded) {
                let share = (prorated[key] ?? 0) > 0 ? " (prorated refunds: the ledger books the refunded share)" : ""
                entry.explanations.append(Explanation(code: .amountDiffers, units: entry.ledger.unitsRefunded,
                                                      message: "refunded \(entry.apple.amountRefunded) by Apple, \(entry.ledger.amountRefunded) by the ledger\(share)"))
            }
            if let total = proceeds[key] { entry.appleProceeds = DecimalText.format(total) }
            Self.ledgerProceeds(of: &entry, groups: ledgerGroups[key] ?? [], reported: reportedProceeds[key]?.mapValues { ($0.units, $0.total, $0.currency) } ?? [:],
                                rules: rules)
            entry.status = entry.explanations.isEmpty ? .matched
                : entry.explanations.allSatisfy(\.code.isBenign) ? .explained : .differs
            rows[key] = entry
        }

        let ordered = keys.map { rows[$0]! }
        let dayRows = days.map { day in
            let ofDay = ordered.filter { $0.day == day }
            return Day(day: day, report: reports[day]?.contentHash, rows: ofDay.count, differing: ofDay.filter { $0.status == .differs }.count)
        }
        return Reconciliation(app: app, from: days.first ?? "", to: days.last ?? "", timeZone: timeZone, rows: ordered, days: dayRows,
                              sandboxUnits: sandboxUnits)
    }

    /// The ledger's proceeds of a row: Apple's per-unit proceeds of the day's matching line where
    /// the report has one (sales and refunds apart), else the rules' estimate of each group.
    private static func ledgerProceeds(
        of row: inout Row, groups: [LedgerSalesGroup], reported: [Bool: (units: Int, total: Decimal, currency: String)], rules: ProceedsRules
    ) {
        guard !groups.isEmpty else { return }
        var total = Decimal(0)
        var sources: Set<ProceedsRules.Source> = []
        var currencies: Set<String> = []
        for group in groups {
            if let line = reported[group.grain.refund], line.units > 0 {
                let amount = line.total / Decimal(line.units) * Decimal(group.units)
                total += group.grain.refund ? -amount : amount
                sources.insert(.appleReport)
                currencies.insert(line.currency)
            } else if let estimate = rules.estimate(group) {
                total += estimate.amount
                sources.insert(estimate.source)
                if let currency = group.grain.currency { currencies.insert(currency) }
            } else {
                row.proceedsSource = .unknown
                return
            }
        }
        guard currencies.count <= 1 else {
            row.proceedsSource = .unknown  // never added across currencies
            return
        }
        row.ledgerProceeds = DecimalText.format(total)
        row.ledgerProceedsCurrency = currencies.first
        row.proceedsSource = sources.count == 1 ? sources.first : .mixed
    }

    private static func add(_ text: String, _ value: Decimal) -> String {
        DecimalText.format((DecimalText.parse(text) ?? 0) + value)
    }

    /// Whole days between two `yyyy-MM-dd` dates.
    static func daysApart(_ first: String, _ second: String) -> Int? {
        let format = Date.ISO8601FormatStyle().year().month().day()
        guard let one = try? format.parse(first), let two = try? format.parse(second) else { return nil }
        return Int((abs(one.timeIntervalSince(two)) / 86_400).rounded())
    }
}
