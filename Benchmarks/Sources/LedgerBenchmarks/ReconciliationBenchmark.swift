import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import LedgerStore
import Logging
import PostgresNIO

/// What reconciling a month costs for a large app: `ReconcileSalesReports` over a month of audit
/// rows and Apple's 30 daily reports of the same sales, against the same aggregation of the audit
/// table as one SQL statement, in the same run.
///
/// The audit rows are written straight into the live audit table (the benchmark measures the
/// reconciliation, not ingest): `transactions` purchases over 30 Pacific days, in 20 products and
/// 12 storefronts with their currencies and prices (4 products monthly auto-renewable
/// subscriptions, each user's payments of one a subscription), 2 % refunded, 1 % sandbox. The reports are
/// made from the same rows plus one sale in about one line in a hundred, so the reconciliation has
/// differences to explain and transactions to list.
public struct ReconciliationBenchmark: Sendable {
    public struct Result: Sendable {
        public let transactions: Int
        public let reportLines: Int
        public let rows: Int
        public let differing: Int
        /// Best of the timed runs.
        public let seconds: Double
        public let baselineSeconds: Double
        public let baselineGroups: Int
        /// The month's audit summary with every row's proceeds (`AuditQueries.summary`, grouped by
        /// day, product, currency, environment and storefront), and the same totals without
        /// proceeds as one statement.
        public let summaryRows: Int
        public let summarySeconds: Double
        public let summaryBaselineSeconds: Double

        public var ratio: Double { seconds / baselineSeconds }
        public var summaryRatio: Double { summarySeconds / summaryBaselineSeconds }
    }

    static let app = "com.example.reconcile-bench"
    static let storefronts: [(String, String, String)] = [
        ("USA", "USD", "0.99"), ("FRA", "EUR", "1.09"), ("DEU", "EUR", "1.09"), ("GBR", "GBP", "0.89"), ("JPN", "JPY", "160"),
        ("CAN", "CAD", "1.39"), ("AUS", "AUD", "1.49"), ("BRA", "BRL", "5.90"), ("IND", "INR", "89"), ("ITA", "EUR", "1.09"),
        ("ESP", "EUR", "1.09"), ("MEX", "MXN", "19"),
    ]

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func run(transactions: Int, runs: Int = 3, progress: @Sendable (String) -> Void) async throws -> Result {
        guard transactions >= 1000 else { throw StoreError.invalidInput("a reconciliation benchmark needs at least 1,000 transactions") }
        try await ProjectionRunner(client: client, listenConfiguration: nil, pollInterval: .seconds(1), logger: logger).prepare()
        try await AppRegistry(client: client, logger: logger).addApp(Self.app, sharedSecret: nil)
        let table = "ledger.\(AuditTrailProjection.name.rawValue)_v\(AuditTrailProjection.version)"
        let zone = ReconcileSalesReports.defaultTimeZone
        let (from, to) = ("2026-10-01", "2026-10-30")

        progress("writing \(transactions) audit rows")
        let values = Self.storefronts.enumerated().map { "(\($0.offset), '\($0.element.0)', '\($0.element.1)', \($0.element.2))" }.joined(separator: ", ")
        try await client.query(PostgresQuery(unsafeSQL: """
            INSERT INTO \(table) (app, user_id, position, occurred_at, recorded_at, environment, device_id, event, transaction_id,
                original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer, purchase_date,
                expires_date, revoked, storefront)
            SELECT '\(Self.app)', 'user-' || (i % 50000), i, t, t, CASE WHEN i % 100 = 0 THEN 'sandbox' ELSE 'production' END, NULL,
                   CASE WHEN subscription THEN 'renewal' ELSE 'purchase' END, 't' || i,
                   CASE WHEN subscription THEN 'sub-' || (i % 50000) || '-' || (i % 20) ELSE 't' || i END,
                   'product.' || (i % 20), CASE WHEN subscription THEN 'auto_renewable' ELSE 'consumable' END, quantity, s.price, s.currency,
                   s.price * quantity, 'app_store', 'none', t, CASE WHEN subscription THEN t + interval '1 month' END, i % 50 = 7, s.storefront
            FROM generate_series(1, \(transactions)) AS i
            CROSS JOIN LATERAL (SELECT (timestamp '\(from) 00:00' AT TIME ZONE '\(zone)') + (i::float8 / \(transactions) * interval '30 days') AS t,
                                       i % 20 < 4 AS subscription) AS at
            CROSS JOIN LATERAL (SELECT CASE WHEN subscription THEN 1 ELSE 1 + (i % 3) END AS quantity) AS q
            JOIN (VALUES \(values)) AS s (n, storefront, currency, price) ON s.n = i % \(Self.storefronts.count)
            """), logger: logger)
        try await client.query(PostgresQuery(unsafeSQL: """
            INSERT INTO \(table) (app, user_id, position, occurred_at, recorded_at, environment, device_id, event, transaction_id,
                original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer, purchase_date,
                revoked, refund, storefront)
            SELECT app, user_id, position + \(transactions), occurred_at + interval '1 day', recorded_at, environment, device_id, 'refund',
                   transaction_id, original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer,
                   purchase_date, true, 'full', storefront
            FROM \(table) WHERE app = '\(Self.app)' AND revoked AND occurred_at < (timestamp '\(to) 00:00' AT TIME ZONE '\(zone)')
            """), logger: logger)
        try await client.query("ANALYZE \(unescaped: table)", logger: logger)

        progress("making Apple's 30 reports from the same sales")
        let reads = PostgresSalesReports(client: client, logger: logger)
        let period = try ReconcileSalesReports.period(from: from, to: to, timeZone: zone)
        let groups = try await reads.salesGroups(app: Self.app, from: period.start, to: period.end, timeZone: zone)
        var linesByDay: [String: [SalesReportLine]] = [:]
        var reportLines = 0
        for group in groups where !group.grain.sandbox {
            guard let storefront = group.grain.storefront, let country = CountryCodes.alpha2(fromAlpha3: storefront),
                  let currency = group.grain.currency, let price = group.grain.price
            else { continue }
            // In about one group in a hundred, a sale the ledger never heard of: Apple counts it, the ledger does not.
            let units = group.grain.refund ? -group.units : group.units + (reportLines % 97 == 0 ? 1 : 0)
            linesByDay[group.grain.day, default: []].append(SalesReportLine(
                sku: group.grain.productId, title: group.grain.productId, productTypeIdentifier: "IA1", units: String(units),
                developerProceeds: "0.50", customerPrice: group.grain.refund ? "-" + price : price, customerCurrency: currency,
                proceedsCurrency: currency, countryCode: country, beginDate: group.grain.day, endDate: group.grain.day, appleIdentifier: "1"
            ))
            reportLines += 1
        }
        let ledger = PostgresLedger(client: client, logger: logger)
        for day in period.days {
            let lines = linesByDay[day] ?? []
            let text = lines.map { "\($0.sku)\t\($0.units)\t\($0.customerPrice)\t\($0.countryCode)" }.joined(separator: "\n")
            _ = try await ledger.importSalesReports.record(ReceivedSalesReport(
                content: Data("bench \(day)\n\(text)".utf8), reportDate: day, columns: [], lines: lines, otherLines: 0,
                source: "file:bench-\(day)", vendorNumber: nil
            ), app: Self.app)
        }

        var best = Double.infinity
        var reconciliation: Reconciliation?
        for run in 1...runs {
            progress("reconciling, run \(run) of \(runs)")
            let started = ContinuousClock.now
            reconciliation = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: from, to: to, timeZone: zone)
            best = min(best, (ContinuousClock.now - started).inSeconds)
        }
        var baseline = Double.infinity
        var baselineGroups = 0
        for run in 1...runs {
            progress("the same aggregation in one statement, run \(run) of \(runs)")
            let started = ContinuousClock.now
            let rows = try await client.query("""
                SELECT to_char(occurred_at AT TIME ZONE \(zone), 'YYYY-MM-DD'), product_id, storefront, currency, price,
                       event = 'refund', environment = 'sandbox', sum(quantity), sum(amount)
                FROM \(unescaped: table)
                WHERE app = \(Self.app) AND occurred_at >= \(period.start) AND occurred_at < \(period.end)
                GROUP BY 1, 2, 3, 4, 5, 6, 7
                """, logger: logger)
            var count = 0
            for try await _ in rows { count += 1 }
            baseline = min(baseline, (ContinuousClock.now - started).inSeconds)
            baselineGroups = count
        }

        let audit = AuditQueries(client: client, logger: logger)
        let filter = AuditFilter(from: period.start, to: period.end, environment: .all)
        var summaryBest = Double.infinity
        var summaryRows = 0
        for run in 1...runs {
            progress("the month's audit summary with proceeds, run \(run) of \(runs)")
            let started = ContinuousClock.now
            summaryRows = try await audit.summary(app: Self.app, filter: filter, groupBy: Set(AuditGrouping.allCases)).count
            summaryBest = min(summaryBest, (ContinuousClock.now - started).inSeconds)
        }
        var summaryBaseline = Double.infinity
        for run in 1...runs {
            progress("the same totals without proceeds in one statement, run \(run) of \(runs)")
            let started = ContinuousClock.now
            let rows = try await client.query("""
                SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), product_id, currency, environment, storefront,
                       count(*) FILTER (WHERE event <> 'refund'), sum(quantity) FILTER (WHERE event <> 'refund'),
                       sum(amount) FILTER (WHERE event <> 'refund'), count(*) FILTER (WHERE event = 'refund'),
                       sum(quantity) FILTER (WHERE event = 'refund'), sum(amount) FILTER (WHERE event = 'refund'),
                       count(*) FILTER (WHERE amount IS NULL)
                FROM \(unescaped: table)
                WHERE app = \(Self.app) AND occurred_at >= \(period.start) AND occurred_at < \(period.end)
                GROUP BY 1, 2, 3, 4, 5
                """, logger: logger)
            for try await _ in rows {}
            summaryBaseline = min(summaryBaseline, (ContinuousClock.now - started).inSeconds)
        }
        let result = try reconciliation.unwrapped()
        return Result(transactions: transactions, reportLines: reportLines, rows: result.rows.count,
                      differing: result.rows.count(where: { $0.status == .differs }), seconds: best, baselineSeconds: baseline,
                      baselineGroups: baselineGroups, summaryRows: summaryRows, summarySeconds: summaryBest, summaryBaselineSeconds: summaryBaseline)
    }
}

extension Optional {
    fileprivate func unwrapped() throws -> Wrapped {
        guard let self else { throw StoreError.invalidInput("the benchmark made no run") }
        return self
    }
}
