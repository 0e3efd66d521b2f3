import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import PostgresNIO

/// The metrics' reads of the live audit trail.
public struct PostgresMetrics: MetricsReads, Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func subscriptionRows(app: String, environment: StoreEnvironment, before to: Date, asOf: Date) async throws -> [SubscriptionRow] {
        var result: [SubscriptionRow] = []
        var amounts: [String: Decimal] = [:]  // the same few prices over and over: each parsed once
        let posix = Locale(identifier: "en_US_POSIX")
        try await read {
            try await client.forEachRow("""
                SELECT r.user_id, r.original_transaction_id, r.product_id, r.event, r.offer, r.purchase_date, r.expires_date, r.amount::text, r.currency, r.position, r.grace_until,
                       r.revoked AND EXISTS (
                           SELECT 1 FROM ledger.audit_trail f
                           WHERE f.app = r.app AND f.user_id = r.user_id AND f.transaction_id = r.transaction_id AND f.event = 'refund'
                             AND f.recorded_at <= \(asOf)
                       )
                FROM ledger.audit_trail r
                WHERE r.app = \(app) AND r.environment = \(environment.rawValue) AND r.product_type = 'auto_renewable' AND r.event <> 'refund'
                  AND r.purchase_date < \(to) AND r.recorded_at <= \(asOf)
                """, logger: logger) { row in
                let (user, original, product, event, offer, start, end, amount, currency, position, grace, revoked) =
                    try row.decode((String, String, String, String, String, Date, Date?, String?, String?, Int64, Date?, Bool).self)
                var value: Decimal?
                if let amount {
                    if let known = amounts[amount] { value = known } else {
                        value = Decimal(string: amount, locale: posix)
                        amounts[amount] = value
                    }
                }
                result.append(SubscriptionRow(userId: user, originalTransactionId: original, productId: product, event: event, offer: offer,
                                              start: start, end: end, amount: value, currency: currency, revoked: revoked,
                                              position: position, graceUntil: grace))
            }
        }
        return result
    }

    public func serviceGroups(app: String, environment: StoreEnvironment, points: [Date], before to: Date, asOf: Date) async throws
        -> [SubscriptionMetrics.ServiceGroup]
    {
        // width_bucket(x, points) counts the points at or before x: the bucket of the interval holding x.
        // The points are read once (MATERIALIZED): inlined, their text would be parsed again on every row.
        let points = points.map(LedgerJSON.formatTimestamp)
        let rows = try await read {
            try await client.query("""
                WITH p AS MATERIALIZED (SELECT \(points)::timestamptz[] AS points)
                SELECT r.service, coalesce(r.currency, 'none'), r.product_id,
                       width_bucket(r.purchase_date, p.points),
                       CASE WHEN r.service <> 'trial' THEN width_bucket(r.current_until, p.points) END,
                       CASE WHEN r.service_ends + interval '1 day' < \(asOf) THEN width_bucket(r.service_ends, p.points) END,
                       CASE WHEN r.converted_at <= \(asOf) THEN width_bucket(r.converted_at, p.points) END,
                       CASE WHEN r.service = 'trial' AND r.converted_at IS NULL AND r.expires_date + interval '1 day' < \(asOf)
                            THEN width_bucket(r.expires_date, p.points) END,
                       count(*)::bigint, coalesce(sum(r.amount), 0)::text
                FROM ledger.audit_trail r CROSS JOIN p
                WHERE r.app = \(app) AND r.environment = \(environment.rawValue) AND r.service IS NOT NULL AND r.purchase_date < \(to)
                GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
                """, logger: logger)
        }
        var result: [SubscriptionMetrics.ServiceGroup] = []
        for try await (service, currency, product, start, until, churned, converted, expired, count, amount)
            in rows.decode((String, String, String, Int, Int?, Int?, Int?, Int?, Int, String).self) {
            guard let movement = SubscriptionService.Movement(rawValue: service) else { continue }
            result.append(.init(movement: movement, currency: currency, productId: product, start: start, currentUntil: until, churned: churned,
                                converted: converted, expired: expired, rows: count, amount: DecimalText.parse(amount) ?? 0))
        }
        return result
    }

    public func refunds(app: String, environment: StoreEnvironment, from: Date, to: Date, intervals: [SubscriptionMetrics.Interval], asOf: Date?)
        async throws -> [MetricsReport.Refunds]
    {
        let points = SubscriptionMetrics.points(of: intervals).map(LedgerJSON.formatTimestamp)
        let rows = try await read {
            try await client.query("""
                WITH p AS MATERIALIZED (SELECT \(points)::timestamptz[] AS points)
                SELECT width_bucket(r.occurred_at, p.points), r.currency,
                       (count(*) FILTER (WHERE r.event <> 'refund'))::bigint, (count(*) FILTER (WHERE r.event = 'refund'))::bigint,
                       coalesce(sum(r.amount) FILTER (WHERE r.event <> 'refund'), 0)::text, coalesce(sum(r.amount) FILTER (WHERE r.event = 'refund'), 0)::text
                FROM ledger.audit_trail r CROSS JOIN p
                WHERE r.app = \(app) AND r.environment = \(environment.rawValue) AND r.currency IS NOT NULL
                  AND r.occurred_at >= \(from) AND r.occurred_at < \(to) AND (\(asOf)::timestamptz IS NULL OR r.recorded_at <= \(asOf))
                GROUP BY 1, 2 ORDER BY 1, 2
                """, logger: logger)
        }
        var result: [MetricsReport.Refunds] = []
        for try await (bucket, currency, payments, refunds, gross, refunded) in rows.decode((Int, String, Int, Int, String, String).self) {
            guard bucket >= 1, bucket <= intervals.count else { continue }
            result.append(.init(interval: intervals[bucket - 1].label, currency: currency, payments: payments, refunds: refunds,
                                gross: DecimalText.canonical(gross), refunded: DecimalText.canonical(refunded)))
        }
        return result
    }

    public func cohorts(app: String, environment: StoreEnvironment, to: Date, timeZone: String, asOf: Date?) async throws -> [MetricsReport.CohortCell] {
        guard let asOf else { return try await cohortsAsTheTrailStands(app: app, environment: environment, to: to, timeZone: timeZone) }
        let rows = try await read {
            try await client.query("""
                WITH money AS (
                    SELECT user_id, currency, occurred_at, CASE WHEN event = 'refund' THEN -amount ELSE amount END AS net
                    FROM ledger.audit_trail
                    WHERE app = \(app) AND environment = \(environment.rawValue) AND amount IS NOT NULL
                      AND occurred_at < \(to) AND recorded_at <= \(asOf)
                ),
                firsts AS (
                    SELECT user_id, date_trunc('month', min(occurred_at) AT TIME ZONE \(timeZone)) AS cohort
                    FROM money WHERE net > 0 GROUP BY user_id
                )
                SELECT to_char(f.cohort, 'YYYY-MM'),
                       ((extract(year FROM date_trunc('month', m.occurred_at AT TIME ZONE \(timeZone))) - extract(year FROM f.cohort)) * 12
                        + extract(month FROM date_trunc('month', m.occurred_at AT TIME ZONE \(timeZone))) - extract(month FROM f.cohort))::int,
                       m.currency, count(DISTINCT m.user_id)::bigint, sum(m.net)::text
                FROM money m JOIN firsts f ON f.user_id = m.user_id
                GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                """, logger: logger)
        }
        var result: [MetricsReport.CohortCell] = []
        // A free trial's row before the first payment belongs to no month of the cohort.
        for try await (cohort, since, currency, users, net) in rows.decode((String, Int, String, Int, String).self) where since >= 0 {
            result.append(.init(cohort: cohort, monthsSince: since, currency: currency, users: users, net: DecimalText.canonical(net)))
        }
        return result
    }

    /// The cohorts from the rows' places among their users' money: a user counts in a month's
    /// cell on the first of their rows in that month and currency. Months are found among the
    /// months' starts since the App Store opened (a binary search, not a time zone conversion per row).
    func cohortsAsTheTrailStands(app: String, environment: StoreEnvironment, to: Date, timeZone: String) async throws -> [MetricsReport.CohortCell] {
        let months = SubscriptionMetrics.intervals(from: SubscriptionMetrics.appStoreOpened, to: to, byMonth: true,
                                                   timeZone: TimeZone(identifier: timeZone) ?? .gmt)
        let points = SubscriptionMetrics.points(of: months).map(LedgerJSON.formatTimestamp)
        let rows = try await read {
            try await client.query("""
                WITH p AS MATERIALIZED (SELECT \(points)::timestamptz[] AS points),
                m AS (
                    SELECT width_bucket(r.cohort_start, p.points) AS cohort, width_bucket(r.occurred_at, p.points) AS month,
                           width_bucket(r.previous_money_at, p.points) AS previous, r.currency,
                           CASE WHEN r.event = 'refund' THEN -r.amount ELSE r.amount END AS net
                    FROM ledger.audit_trail r CROSS JOIN p
                    WHERE r.app = \(app) AND r.environment = \(environment.rawValue) AND r.amount IS NOT NULL AND r.cohort_start IS NOT NULL
                      AND r.occurred_at < \(to)
                )
                SELECT cohort, month, currency, (count(*) FILTER (WHERE previous IS NULL OR previous <> month))::bigint, sum(net)::text
                FROM m
                GROUP BY cohort, month, currency
                """, logger: logger)
        }
        var result: [MetricsReport.CohortCell] = []
        for try await (cohort, month, currency, users, net) in rows.decode((Int, Int, String, Int, String).self) {
            guard cohort >= 1, cohort <= months.count, month >= cohort, month <= months.count else { continue }
            result.append(.init(cohort: months[cohort - 1].label, monthsSince: month - cohort, currency: currency, users: users,
                                net: DecimalText.canonical(net)))
        }
        return result.sorted { ($0.cohort, $0.monthsSince, $0.currency) < ($1.cohort, $1.monthsSince, $1.currency) }
    }

    private func read<Rows>(_ body: () async throws -> Rows) async throws -> Rows {
        try await readingAuditTrail(body)
    }
}
