import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import LedgerStore
import Logging
import PostgresNIO

/// What the subscription metrics of a year and a month's close cost for a large app, against the
/// rows they read aggregated in one SQL statement, in the same run.
///
/// The audit rows are written straight into the live audit table (the benchmark measures the
/// reads, not ingest): `subscribers` monthly subscriptions over 2025, a tenth starting with a week's
/// free trial, a twentieth stopping in the middle of the year, two currencies, one renewal in a
/// hundred refunded.
public struct MetricsBenchmark: Sendable {
    public struct Result: Sendable {
        public let subscribers: Int
        public let rows: Int
        public let metricsSeconds: Double
        public let metricsBaselineSeconds: Double
        public let closeSeconds: Double
        public let closeRows: Int
        public let closeBaselineSeconds: Double
    }

    static let app = "com.example.metrics-bench"

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func run(subscribers: Int, runs: Int = 3, progress: @Sendable (String) -> Void) async throws -> Result {
        guard subscribers >= 100 else { throw StoreError.invalidInput("a metrics benchmark needs at least 100 subscribers") }
        try await ProjectionRunner(client: client, listenConfiguration: nil, pollInterval: .seconds(1), logger: logger).prepare()
        let ledger = PostgresLedger(client: client, logger: logger)
        try await ledger.registry.addApp(Self.app, sharedSecret: nil)
        try await ledger.handler.defineProduct(try Product(productId: "pro.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                           subscriptionGroup: "pro", prices: ["USD": "9.99", "EUR": "8.99"]), app: Self.app)
        let table = "ledger.\(AuditTrailProjection.tableName)"
        progress("writing a year of \(subscribers) monthly subscriptions")
        try await client.query(PostgresQuery(unsafeSQL: """
            INSERT INTO \(table) (app, user_id, position, occurred_at, recorded_at, environment, device_id, event, transaction_id,
                original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer, purchase_date,
                expires_date, revoked)
            SELECT '\(Self.app)', 'user-' || s, s * 100 + m, starts, starts, 'production', NULL,
                   CASE WHEN m = 0 THEN 'purchase' ELSE 'renewal' END, 't-' || s || '-' || m, 't-' || s || '-0', 'pro.month', 'auto_renewable', 1,
                   CASE WHEN trial THEN 0 ELSE price END, currency, CASE WHEN trial THEN 0 ELSE price END, 'app_store',
                   CASE WHEN trial THEN 'free_trial' ELSE 'none' END, starts, ends, m > 0 AND (s + m) % 100 = 0
            FROM generate_series(1, \(subscribers)) AS s
            CROSS JOIN LATERAL (SELECT CASE WHEN s % 2 = 0 THEN 'EUR' ELSE 'USD' END AS currency,
                                       CASE WHEN s % 2 = 0 THEN 8.99 ELSE 9.99 END AS price,
                                       timestamptz '2025-01-01 00:00+00' + (s % 28) * interval '1 day' AS first) AS plan
            CROSS JOIN LATERAL generate_series(0, CASE WHEN s % 20 = 0 THEN 5 ELSE 11 END) AS m
            CROSS JOIN LATERAL (SELECT plan.first + m * interval '1 month' AS starts, plan.first + (m + 1) * interval '1 month' AS ends,
                                       s % 10 = 0 AND m = 0 AS trial) AS period
            """), logger: logger)
        try await client.query("ANALYZE \(unescaped: table)", logger: logger)
        var rows = 0
        for try await count in try await client.query("SELECT count(*)::int FROM \(unescaped: table) WHERE app = \(Self.app)", logger: logger).decode(Int.self) {
            rows = count
        }
        let (from, to) = (LedgerJSON.parseTimestamp("2025-01-01T00:00:00Z")!, LedgerJSON.parseTimestamp("2026-01-01T00:00:00Z")!)

        // Where the time goes: the rows read, then the figures computed from them.
        let reads = PostgresMetrics(client: client, logger: logger)
        let readStarted = ContinuousClock.now
        let subscriptionRows = try await reads.subscriptionRows(app: Self.app, environment: .production, before: to, asOf: Date())
        let readSeconds = (ContinuousClock.now - readStarted).inSeconds
        let computeStarted = ContinuousClock.now
        let intervals = SubscriptionMetrics.intervals(from: from, to: to, byMonth: true, timeZone: TimeZone(identifier: "UTC")!)
        _ = SubscriptionMetrics.compute(subscriptionRows, intervals: intervals, asOf: Date()) { _ in 1 }
        progress(String(format: "%d rows read in %.2f s, figures computed in %.2f s", subscriptionRows.count, readSeconds,
                        (ContinuousClock.now - computeStarted).inSeconds))
        var metricsBest = Double.infinity
        for run in 1...runs {
            progress("metrics of the year by month, run \(run) of \(runs)")
            let started = ContinuousClock.now
            _ = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: from, to: to, byMonth: true)
            metricsBest = min(metricsBest, (ContinuousClock.now - started).inSeconds)
        }
        var metricsBaseline = Double.infinity
        for run in 1...runs {
            progress("the same rows in one SQL aggregation, run \(run) of \(runs)")
            let started = ContinuousClock.now
            let result = try await client.query("""
                SELECT date_trunc('month', purchase_date AT TIME ZONE 'UTC'), currency, count(DISTINCT original_transaction_id), sum(amount)
                FROM \(unescaped: table)
                WHERE app = \(Self.app) AND environment = 'production' AND product_type = 'auto_renewable' AND purchase_date < \(to)
                GROUP BY 1, 2
                """, logger: logger)
            for try await _ in result {}
            metricsBaseline = min(metricsBaseline, (ContinuousClock.now - started).inSeconds)
        }

        // Closing: one month (each close is a new fact; a reopening between runs).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try AnchorSigningKey.create(at: directory.appendingPathComponent("anchor.key").path)
        var closeBest = Double.infinity
        var closeRows = 0
        for run in 1...runs {
            progress("closing 2025-06, run \(run) of \(runs)")
            let started = ContinuousClock.now
            let status = try await ledger.closePeriods.close(app: Self.app, period: "2025-06", closedBy: "bench", signer: key)
            closeBest = min(closeBest, (ContinuousClock.now - started).inSeconds)
            closeRows = status.figures.reduce(0) { $0 + $1.purchases + $1.refunds }
            _ = try await ledger.closePeriods.reopen(app: Self.app, period: "2025-06", reason: "benchmark run \(run)", reopenedBy: "bench")
        }
        var closeBaseline = Double.infinity
        for run in 1...runs {
            progress("the month's totals in one SQL statement, run \(run) of \(runs)")
            let started = ContinuousClock.now
            let result = try await client.query("""
                SELECT environment, currency, product_id, count(*), sum(quantity), sum(amount)
                FROM \(unescaped: table)
                WHERE app = \(Self.app) AND occurred_at >= '2025-06-01 00:00+00' AND occurred_at < '2025-07-01 00:00+00'
                GROUP BY 1, 2, 3
                """, logger: logger)
            for try await _ in result {}
            closeBaseline = min(closeBaseline, (ContinuousClock.now - started).inSeconds)
        }
        return Result(subscribers: subscribers, rows: rows, metricsSeconds: metricsBest, metricsBaselineSeconds: metricsBaseline,
                      closeSeconds: closeBest, closeRows: closeRows, closeBaselineSeconds: closeBaseline)
    }
}

