import Foundation
import LedgerDomain

/// Finance's question of the ledger: does it agree with what Apple says it sold? Reads the latest
/// imported report of each day of a period and the ledger's audit rows of the same reporting days,
/// compares them (`Reconciliation.compare`) and lists the transactions behind every row that
/// differs. Called alike by `GET /v1/audit/reconciliation` and `ledger reports reconcile`.
public struct ReconcileSalesReports: Sendable {
    /// Apple's reports use the time zone of the agreement's territories; worldwide agreements
    /// (most developers') use Pacific Time.
    public static let defaultTimeZone = "America/Los_Angeles"
    /// Longest period reconciled at once.
    public static let maximumDays = 366
    /// Transactions listed per differing row.
    public static let drillDownLimit = 50

    let reports: ImportSalesReports
    let reads: any SalesReads
    let reader: UserStreamReader
    let directory: any AppDirectory
    let settings: (any ReportSettings)?

    public init(reports: ImportSalesReports, reads: any SalesReads, reader: UserStreamReader, directory: any AppDirectory,
                settings: (any ReportSettings)? = nil) {
        self.reports = reports
        self.reads = reads
        self.reader = reader
        self.directory = directory
        self.settings = settings
    }

    /// The reconciliation of `app` from `from` to `to` (`yyyy-MM-dd`, both included) in `timeZone`:
    /// by default the app's reporting time zone (`ledger reports time-zone`), else Pacific Time.
    public func reconcile(app: String, from: String, to: String, timeZone given: String? = nil) async throws -> Reconciliation {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        let timeZone = try await reportingTimeZone(app: app, given: given)
        let period = try Self.period(from: from, to: to, timeZone: timeZone)
        async let latest = reports.latest(app: app, from: from, to: to)
        async let groups = reads.salesGroups(app: app, from: period.start, to: period.end, timeZone: timeZone)
        async let catalog = reader.catalog(app: app)
        async let proceedsRules = settings?.rules(app: app) ?? ProceedsRules()
        let (reported, ledger, products, estimates) = try await (latest, groups, catalog, proceedsRules)
        var reconciliation = Reconciliation.compare(
            app: app, days: period.days, timeZone: timeZone, reports: reported.mapValues(\.report), ledger: ledger,
            products: Set(products.history.keys), rules: estimates
        )
        struct Grain: Hashable { let day, productId: String; let country, currency, price: String? }
        let groupsByGrain = Dictionary(grouping: ledger.filter { !$0.grain.sandbox }) { group in
            Grain(day: group.grain.day, productId: group.grain.productId, country: group.grain.storefront.flatMap(CountryCodes.alpha2(fromAlpha3:)),
                  currency: group.grain.currency, price: group.grain.price.map(DecimalText.canonical))
        }
        for index in reconciliation.rows.indices where reconciliation.rows[index].status != .matched {
            let row = reconciliation.rows[index]
            guard row.ledger.unitsSold + row.ledger.unitsRefunded > 0 else { continue }
            var found: [String] = []
            for group in groupsByGrain[Grain(day: row.day, productId: row.productId, country: row.country, currency: row.currency, price: row.price)] ?? [] {
                found += try await reads.transactions(app: app, in: group.grain, timeZone: timeZone, limit: Self.drillDownLimit - found.count)
                if found.count >= Self.drillDownLimit { break }
            }
            reconciliation.rows[index].transactions = found
        }
        return reconciliation
    }

    /// The time zone asked for, else the app's, else Pacific Time.
    public func reportingTimeZone(app: String, given: String? = nil) async throws -> String {
        if let given { return given }
        return try await settings?.reportingTimeZone(app: app) ?? Self.defaultTimeZone
    }

    /// The reporting days of a period and the instants that bound them.
    public static func period(from: String, to: String, timeZone identifier: String) throws -> (days: [String], start: Date, end: Date) {
        guard let zone = TimeZone(identifier: identifier) else {
            throw AccessError.invalidInput("time zone '\(identifier)' is not an IANA name such as America/Los_Angeles or Europe/Paris")
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        func day(_ text: String, _ name: String) throws -> DateComponents {
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
                  let year = Int(parts[0]), let month = Int(parts[1]), let dayOfMonth = Int(parts[2]),
                  let date = calendar.date(from: DateComponents(year: year, month: month, day: dayOfMonth)),
                  calendar.component(.day, from: date) == dayOfMonth, calendar.component(.month, from: date) == month
            else { throw AccessError.invalidInput("\(name) '\(text)' is not a date: use yyyy-MM-dd, e.g. 2026-11-01") }
            return DateComponents(year: year, month: month, day: dayOfMonth)
        }
        let first = try day(from, "from"), last = try day(to, "to")
        guard let start = calendar.date(from: first), let lastStart = calendar.date(from: last) else {
            throw AccessError.invalidInput("the period from \(from) to \(to) cannot be placed in \(identifier)")
        }
        guard start <= lastStart else { throw AccessError.invalidInput("from (\(from)) is after to (\(to))") }
        var days: [String] = []
        var cursor = start
        while cursor <= lastStart {
            let parts = calendar.dateComponents([.year, .month, .day], from: cursor)
            days.append(String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!))
            guard days.count <= maximumDays else {
                throw AccessError.invalidInput("a reconciliation covers at most \(maximumDays) days: ask for a shorter period")
            }
            cursor = calendar.date(byAdding: .day, value: 1, to: cursor)!
        }
        return (days, start, cursor)
    }
}
