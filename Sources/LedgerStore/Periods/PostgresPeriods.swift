import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import PostgresNIO

/// Closed periods' rows in PostgreSQL (`ledger.closed_period_rows`, migration 0024), kept from the
/// live audit trail and compared with it.
public struct PostgresPeriods: PeriodStore, Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func keepRows(app: String, closeId: UUID, from: Date, to: Date) async throws -> KeptPeriodRows {
        let name = ProjectionName.auditTrail.rawValue
        return try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                // One snapshot for the checkpoint and the rows: the rows are exactly the log's up to it.
                try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: logger)
                var live: (version: Int, position: Int64)?
                for try await (version, position) in try await connection.query(
                    "SELECT version, position FROM ledger.projections WHERE name = \(name) AND status = 'live'", logger: logger
                ).decode((Int, Int64).self) { live = (version, position) }
                guard let live else { throw AuditQueryError.notReady }
                try await connection.query("""
                    INSERT INTO ledger.closed_period_rows (close_id, app, position, event, user_id, transaction_id, environment, product_id,
                        storefront, currency, price, quantity, amount, refund, reporting_day, past_a_year)
                    WITH picked AS (
                        SELECT * FROM ledger.audit_trail WHERE app = \(app) AND occurred_at >= \(from) AND occurred_at < \(to)
                    ),
                    subscription_rows AS (
                        SELECT \(unescaped: PaidService.subscriptionColumns) FROM ledger.audit_trail
                        WHERE app = \(app) AND \(unescaped: PaidService.subscriptionConditions)
                          AND user_id IN (SELECT user_id FROM picked WHERE product_type = 'auto_renewable')
                    ),
                    \(unescaped: PaidService.paidCTE)
                    SELECT \(closeId), r.app, r.position, r.event, r.user_id, r.transaction_id, r.environment, r.product_id, r.storefront,
                           r.currency, r.price, r.quantity, r.amount, r.refund,
                           to_char(r.occurred_at AT TIME ZONE \(unescaped: PaidService.reportingTimeZone(app: "r.app")), 'YYYY-MM-DD'),
                           coalesce(paid.past_a_year, false)
                    FROM picked r
                    LEFT JOIN paid ON paid.user_id = r.user_id AND paid.transaction_id = r.transaction_id
                    """, logger: logger)
                var kept = KeptPeriodRows(position: live.position, auditTrailVersion: live.version, rows: 0, checksum: "0")
                for try await (rows, checksum) in try await connection.query("""
                    SELECT count(*)::bigint, coalesce(sum(ledger.closed_row_checksum(position, event, user_id, transaction_id, environment,
                                                                                    product_id, currency, quantity, amount)), 0)::text
                    FROM ledger.closed_period_rows WHERE close_id = \(closeId)
                    """, logger: logger).decode((Int, String).self) {
                    kept = KeptPeriodRows(position: live.position, auditTrailVersion: live.version, rows: rows, checksum: checksum)
                }
                return kept
            }
        }
    }

    public func keptParts(closeId: UUID) async throws -> [AuditSummaryPart] {
        let (taken, givenBack) = (AuditEventKind.stored(.taken), AuditEventKind.stored(.givenBack))
        let rows = try await client.query("""
            SELECT product_id, currency, environment, reporting_day, past_a_year, storefront, price::text,
                   (count(*) FILTER (WHERE event = ANY(\(taken)::text[])))::bigint,
                   coalesce(sum(quantity) FILTER (WHERE event = ANY(\(taken)::text[])), 0)::bigint,
                   coalesce(sum(amount) FILTER (WHERE event = ANY(\(taken)::text[])), 0)::text,
                   (count(*) FILTER (WHERE event = ANY(\(givenBack)::text[])))::bigint,
                   coalesce(sum(quantity) FILTER (WHERE event = ANY(\(givenBack)::text[])), 0)::bigint,
                   coalesce(sum(amount) FILTER (WHERE event = ANY(\(givenBack)::text[])), 0)::text,
                   (count(*) FILTER (WHERE amount IS NULL))::bigint
            FROM ledger.closed_period_rows WHERE close_id = \(closeId)
            GROUP BY 1, 2, 3, 4, 5, 6, 7, event = ANY(\(givenBack)::text[]), CASE WHEN refund = 'prorated' THEN position END
            """, logger: logger)
        var parts: [AuditSummaryPart] = []
        for try await (product, currency, environment, reportingDay, pastAYear, storefront, price, purchases, units, gross, refunds, refundedUnits,
                       refundedAmount, unpriced) in rows.decode(
            (String, String?, String, String, Bool, String?, String?, Int, Int, String, Int, Int, String, Int).self
        ) {
            let store = StoreEnvironment(rawValue: environment) ?? .production
            parts.append(AuditSummaryPart(
                day: nil, productId: product, currency: currency, environment: store, storefront: nil,
                basis: ProceedsBasis(reportingDay: reportingDay, pastAYear: pastAYear), basisProductId: product, basisStorefront: storefront,
                price: price, sandbox: store == .sandbox, purchases: purchases, units: units, gross: gross, refunds: refunds,
                refundedUnits: refundedUnits, refundedAmount: refundedAmount, unpriced: unpriced
            ))
        }
        return parts
    }

    public func changedRows(app: String, closeId: UUID, from: Date, to: Date, after position: Int64) async throws -> [ChangedPeriodRow] {
        let userPrefix = StreamID.userPrefix(app: app)
        let catalog = try StreamID.catalog(app: app).rawValue
        let rows = try await client.query("""
            WITH now AS (
                SELECT position, event, user_id, transaction_id, environment, product_id, currency, quantity, amount
                FROM ledger.audit_trail WHERE app = \(app) AND occurred_at >= \(from) AND occurred_at < \(to)
            ),
            kept AS (
                SELECT position, event, user_id, transaction_id, environment, product_id, currency, quantity, amount
                FROM ledger.closed_period_rows WHERE close_id = \(closeId)
            ),
            changed AS (
                SELECT coalesce(n.position, k.position) AS position, coalesce(n.event, k.event) AS event,
                       coalesce(n.user_id, k.user_id) AS user_id, coalesce(n.transaction_id, k.transaction_id) AS transaction_id,
                       k.position IS NOT NULL AS was_kept, k.environment AS k_environment, k.product_id AS k_product, k.currency AS k_currency,
                       k.quantity AS k_quantity, k.amount::text AS k_amount,
                       n.position IS NOT NULL AS is_now, n.environment AS n_environment, n.product_id AS n_product, n.currency AS n_currency,
                       n.quantity AS n_quantity, n.amount::text AS n_amount
                FROM now n FULL JOIN kept k ON n.position = k.position AND n.event = k.event
                WHERE k.position IS NULL OR n.position IS NULL
                   OR (n.environment, n.product_id, n.currency, n.quantity, n.amount)
                      IS DISTINCT FROM (k.environment, k.product_id, k.currency, k.quantity, k.amount)
            )
            SELECT c.position, c.event, c.user_id, c.transaction_id,
                   c.was_kept, c.k_environment, c.k_product, c.k_currency, c.k_quantity, c.k_amount,
                   c.is_now, c.n_environment, c.n_product, c.n_currency, c.n_quantity, c.n_amount,
                   cause.position, cause.event_type, cause.stream_id, cause.recorded_at
            FROM changed c
            LEFT JOIN LATERAL (
                SELECT e.position, e.event_type, e.stream_id, e.recorded_at FROM ledger.events e
                WHERE (NOT c.was_kept AND c.position > \(position) AND e.position = c.position)
                   OR ((c.was_kept OR c.position <= \(position)) AND e.position > \(position)
                       AND e.stream_id IN (\(userPrefix) || c.user_id, \(catalog)))
                ORDER BY e.position
                LIMIT 1
            ) cause ON true
            ORDER BY c.position, c.event
            """, logger: logger)
        var changed: [ChangedPeriodRow] = []
        for try await (rowPosition, event, user, transaction, wasKept, keptEnvironment, keptProduct, keptCurrency, keptQuantity, keptAmount,
                       isNow, nowEnvironment, nowProduct, nowCurrency, nowQuantity, nowAmount, causePosition, causeType, causeStream, causeAt)
            in rows.decode((Int64, String, String, String, Bool, String?, String?, String?, Int?, String?,
                            Bool, String?, String?, String?, Int?, String?, Int64?, String?, String?, Date?).self) {
            func values(_ present: Bool, _ environment: String?, _ product: String?, _ currency: String?, _ quantity: Int?, _ amount: String?)
                -> ChangedPeriodRow.Values?
            {
                guard present, let environment, let product, let quantity else { return nil }
                return .init(environment: StoreEnvironment(rawValue: environment) ?? .production, productId: product, currency: currency,
                             quantity: quantity, amount: amount)
            }
            var cause: ChangedPeriodRow.Fact?
            if let causePosition, let causeType, let causeStream, let causeAt {
                cause = .init(position: causePosition, type: causeType, stream: causeStream, recordedAt: causeAt)
            }
            changed.append(ChangedPeriodRow(
                position: rowPosition, event: event, userId: user, transactionId: transaction,
                kept: values(wasKept, keptEnvironment, keptProduct, keptCurrency, keptQuantity, keptAmount),
                now: values(isNow, nowEnvironment, nowProduct, nowCurrency, nowQuantity, nowAmount), cause: cause
            ))
        }
        return changed
    }

    public func auditTrailVersion() async throws -> (version: Int, createdAt: Date) {
        let name = ProjectionName.auditTrail.rawValue
        let rows = try await client.query(
            "SELECT version, created_at FROM ledger.projections WHERE name = \(name) AND status = 'live'", logger: logger
        )
        for try await (version, created) in rows.decode((Int, Date).self) { return (version, created) }
        throw AuditQueryError.notReady
    }
}

extension AnchorSigningKey: PeriodSigner {
    public var publicKeyPEM: String { publicKey.pem }

    public func sign(_ message: Data) throws -> Data {
        try signature(for: message)
    }
}
