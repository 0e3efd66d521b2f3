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
/// reads, not ingest): `subscribers` monthly subscriptions over 2025, a tenth starting with a
/// month's free trial, a twentieth stopping in the middle of the year, two currencies, one renewal
/// in a hundred refunded (with its refund row). The fold's judgements the audit trail keeps
/// (`SubscriptionService`, the rows' places among their users' money) are filled in by window
/// functions over the written rows, as the fold would judge them.
public struct MetricsBenchmark: Sendable {
    public struct Result: Sendable {
        public let subscribers: Int
        public let rows: Int
        public let metricsSeconds: Double
        /// The same year rebuilt from the rows as of an instant (the past's way).
        public let metricsAsOfSeconds: Double
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
        progress("refunding one renewal in a hundred, and judging the rows as the fold does")
        try await client.query(PostgresQuery(unsafeSQL: """
            INSERT INTO \(table) (app, user_id, position, occurred_at, recorded_at, environment, device_id, event, transaction_id,
                original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer, purchase_date,
                expires_date, revoked, refund)
            SELECT app, user_id, position + 50, occurred_at + interval '3 days', recorded_at + interval '3 days', environment, device_id, 'refund',
                   transaction_id, original_transaction_id, product_id, product_type, quantity, price, currency, amount, price_source, offer,
                   purchase_date, expires_date, true, 'full'
            FROM \(table) WHERE app = '\(Self.app)' AND revoked
            """), logger: logger)
        for judgement in Self.judgements(table) { try await client.query(PostgresQuery(unsafeSQL: judgement), logger: logger) }
        try await client.query("VACUUM ANALYZE \(unescaped: table)", logger: logger)
        var rows = 0
        for try await count in try await client.query("SELECT count(*)::int FROM \(unescaped: table) WHERE app = \(Self.app)", logger: logger).decode(Int.self) {
            rows = count
        }
        let (from, to) = (LedgerJSON.parseTimestamp("2025-01-01T00:00:00Z")!, LedgerJSON.parseTimestamp("2026-01-01T00:00:00Z")!)

        // Where the time goes: each read of the present on its own.
        let reads = PostgresMetrics(client: client, logger: logger)
        let intervals = SubscriptionMetrics.intervals(from: from, to: to, byMonth: true, timeZone: TimeZone(identifier: "UTC")!, until: Date())
        func timed(_ body: () async throws -> Void) async throws -> Double {
            let started = ContinuousClock.now
            try await body()
            return (ContinuousClock.now - started).inSeconds
        }
        let groups = try await timed {
            _ = try await reads.serviceGroups(app: Self.app, environment: .production, points: SubscriptionMetrics.points(of: intervals), before: to,
                                              asOf: Date())
        }
        let refunds = try await timed {
            _ = try await reads.refunds(app: Self.app, environment: .production, from: from, to: to, intervals: intervals, asOf: nil)
        }
        let cohorts = try await timed { _ = try await reads.cohorts(app: Self.app, environment: .production, to: to, timeZone: "UTC", asOf: nil) }
        progress(String(format: "one at a time: subscription groups %.2f s, refunds %.2f s, cohorts %.2f s", groups, refunds, cohorts))
        var metricsBest = Double.infinity
        for run in 1...runs {
            progress("metrics of the year by month, run \(run) of \(runs)")
            let started = ContinuousClock.now
            _ = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: from, to: to, byMonth: true)
            metricsBest = min(metricsBest, (ContinuousClock.now - started).inSeconds)
        }
        progress("metrics of the year by month as of an instant, rebuilt from the rows")
        let asOfStarted = ContinuousClock.now
        _ = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: from, to: to, byMonth: true,
                                             asOf: Date().addingTimeInterval(-1))
        let metricsAsOf = (ContinuousClock.now - asOfStarted).inSeconds
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
        return Result(subscribers: subscribers, rows: rows, metricsSeconds: metricsBest, metricsAsOfSeconds: metricsAsOf, metricsBaselineSeconds: metricsBaseline,
                      closeSeconds: closeBest, closeRows: closeRows, closeBaselineSeconds: closeBaseline)
    }

    /// What the fold judges of the written rows, in SQL: each paid period's movement, its time as
    /// the current period and its stretch's end; each trial's conversion; each money row's cohort
    /// and the user's money row before it in its currency.
    static func judgements(_ table: String) -> [String] {
        ["""
        UPDATE \(table) t SET service = j.service, current_until = j.current_until, service_ends = j.service_ends
        FROM (
            SELECT user_id, position, event,
                   CASE WHEN before_end IS NULL THEN 'new' WHEN purchase_date > before_end + interval '1 day' THEN 'reactivated' ELSE 'renewed' END AS service,
                   CASE WHEN next_start <= greatest(before_end, expires_date) + interval '1 day' THEN next_start
                        ELSE greatest(before_end, expires_date) END AS current_until,
                   CASE WHEN next_start IS NULL OR next_start > greatest(before_end, expires_date) + interval '1 day'
                        THEN greatest(before_end, expires_date) END AS service_ends
            FROM (
                SELECT user_id, position, event, purchase_date, expires_date,
                       max(expires_date) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end, lead(purchase_date) OVER w AS next_start
                FROM \(table)
                WHERE app = '\(app)' AND event <> 'refund' AND offer <> 'free_trial' AND NOT revoked AND amount > 0
                WINDOW w AS (PARTITION BY user_id, original_transaction_id ORDER BY purchase_date, expires_date, position)
            ) paid
        ) j
        WHERE t.app = '\(app)' AND t.user_id = j.user_id AND t.position = j.position AND t.event = j.event
        """, """
        UPDATE \(table) t SET service = 'trial', converted_at = (
            SELECT min(p.purchase_date) FROM \(table) p
            WHERE p.app = t.app AND p.user_id = t.user_id AND p.original_transaction_id = t.original_transaction_id
              AND p.service IN ('new', 'reactivated', 'renewed') AND p.purchase_date >= t.purchase_date
              AND p.purchase_date <= t.expires_date + interval '1 day')
        WHERE t.app = '\(app)' AND t.offer = 'free_trial' AND t.event <> 'refund'
        """, """
        UPDATE \(table) t SET cohort_start = m.cohort_start, previous_money_at = m.previous_money_at
        FROM (
            SELECT user_id, position, event,
                   min(occurred_at) FILTER (WHERE event <> 'refund' AND amount > 0) OVER (PARTITION BY user_id) AS cohort_start,
                   lag(occurred_at) OVER (PARTITION BY user_id, currency ORDER BY occurred_at, position) AS previous_money_at
            FROM \(table) WHERE app = '\(app)' AND amount IS NOT NULL
        ) m
        WHERE t.app = '\(app)' AND t.user_id = m.user_id AND t.position = m.position AND t.event = m.event
        """]
    }
}
