import Foundation
import LedgerApplication
import LedgerDomain
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
                SELECT r.user_id, r.original_transaction_id, r.product_id, r.event, r.offer, r.purchase_date, r.expires_date, r.amount::text, r.currency,
                       r.revoked AND EXISTS (
                           SELECT 1 FROM ledger.audit_trail f
                           WHERE f.app = r.app AND f.user_id = r.user_id AND f.transaction_id = r.transaction_id AND f.event = 'refund'
                             AND f.recorded_at <= \(asOf)
                       )
                FROM ledger.audit_trail r
                WHERE r.app = \(app) AND r.environment = \(environment.rawValue) AND r.product_type = 'auto_renewable' AND r.event <> 'refund'
                  AND r.purchase_date < \(to) AND r.recorded_at <= \(asOf)
                """, logger: logger) { row in
                let (user, original, product, event, offer, start, end, amount, currency, revoked) =
                    try row.decode((String, String, String, String, String, Date, Date?, String?, String?, Bool).self)
                var value: Decimal?
                if let amount {
                    if let known = amounts[amount] { value = known } else {
                        value = Decimal(string: amount, locale: posix)
                        amounts[amount] = value
                    }
                }
                result.append(SubscriptionRow(userId: user, originalTransactionId: original, productId: product, event: event, offer: offer,
                                              start: start, end: end, amount: value, currency: currency, revoked: revoked))
            }
        }
        return result
    }

    public func refunds(app: String, environment: StoreEnvironment, from: Date, to: Date, byMonth: Bool, timeZone: String, asOf: Date) async throws
        -> [MetricsReport.Refunds]
    {
        let format = byMonth ? "YYYY-MM" : "YYYY-MM-DD"
        let rows = try await read {
            try await client.query("""
                SELECT to_char(occurred_at AT TIME ZONE \(timeZone), \(format)), currency,
                       (count(*) FILTER (WHERE event <> 'refund' AND amount > 0))::bigint, (count(*) FILTER (WHERE event = 'refund'))::bigint,
                       coalesce(sum(amount) FILTER (WHERE event <> 'refund'), 0)::text, coalesce(sum(amount) FILTER (WHERE event = 'refund'), 0)::text
                FROM ledger.audit_trail
                WHERE app = \(app) AND environment = \(environment.rawValue) AND currency IS NOT NULL
                  AND occurred_at >= \(from) AND occurred_at < \(to) AND recorded_at <= \(asOf)
                GROUP BY 1, 2 ORDER BY 1, 2
                """, logger: logger)
        }
        var result: [MetricsReport.Refunds] = []
        for try await (interval, currency, payments, refunds, gross, refunded) in rows.decode((String, String, Int, Int, String, String).self) {
            result.append(.init(interval: interval, currency: currency, payments: payments, refunds: refunds,
                                gross: DecimalText.canonical(gross), refunded: DecimalText.canonical(refunded)))
        }
        return result
    }

    public func cohorts(app: String, environment: StoreEnvironment, to: Date, timeZone: String, asOf: Date) async throws -> [MetricsReport.CohortCell] {
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
        for try await (cohort, since, currency, users, net) in rows.decode((String, Int, String, Int, String).self) {
            result.append(.init(cohort: cohort, monthsSince: since, currency: currency, users: users, net: DecimalText.canonical(net)))
        }
        return result
    }

    private func read<Rows>(_ body: () async throws -> Rows) async throws -> Rows {
        try await readingAuditTrail(body)
    }
}
