import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import PostgresNIO

/// Finance's reads of the audit trail (`ledger.audit_trail`, the live version), one app at a time.
///
/// Rows come in (position, event) order with keyset pagination: a page starts strictly after the
/// previous page's last key, so a long export neither skips nor repeats rows and never scans past
/// what it returns (the table has an index on (app, position, event)). Sums are taken in SQL
/// `numeric` and returned as decimal text: money is never a float.
public struct AuditQueries: AuditReads, Sendable {
    /// The largest page `events` returns.
    public static let maximumPageSize = AuditPage.maximumSize

    let client: DatabasePool
    let logger: Logger
    /// Adds each row's proceeds; its fold of Apple's reports lives as long as this value's copies.
    let proceeds: AuditProceeds

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
        self.proceeds = AuditProceeds(
            settings: PostgresSalesReports(client: client, logger: logger),
            reported: ReportedProceeds(store: PostgresEventStore(client: client, logger: logger))
        )
    }

    // MARK: Rows

    /// Up to `limit` rows after `cursor` (from the start when nil), and the cursor of the next page.
    public func events(app: String, filter: AuditFilter = AuditFilter(), after cursor: AuditCursor? = nil, limit: Int = 1_000) async throws -> AuditPage {
        guard (1...Self.maximumPageSize).contains(limit) else { throw AuditQueryError.invalidLimit(limit, maximum: Self.maximumPageSize) }
        try filter.validate()
        if let cursor, cursor.app != app { throw AuditQueryError.invalidCursor("the cursor was issued for a different app") }
        let afterPosition = cursor?.position ?? 0
        let afterEvent = cursor?.event.rawValue ?? ""
        let query: PostgresQuery = """
            WITH page AS (
                SELECT position, occurred_at, recorded_at, environment, user_id, device_id, event, transaction_id,
                       original_transaction_id, product_id, product_type, quantity, price, currency,
                       amount, price_source, catalog_price, offer, purchase_date, expires_date, revoked,
                       refund, refund_share, storefront
                FROM ledger.audit_trail
                WHERE app = \(app) AND (position, event) > (\(afterPosition), \(afterEvent))\(conditionsOf: filter)
                ORDER BY position, event
                LIMIT \(limit + 1)
            ),
            subscription_rows AS (
                SELECT \(unescaped: PaidService.subscriptionColumns) FROM ledger.audit_trail
                WHERE app = \(app) AND \(unescaped: PaidService.subscriptionConditions)
                  AND user_id IN (SELECT user_id FROM page WHERE product_type = 'auto_renewable')
            ),
            \(unescaped: PaidService.paidCTE)
            SELECT p.position, p.occurred_at, p.recorded_at, p.environment, p.user_id, p.device_id, p.event, p.transaction_id,
                   p.original_transaction_id, p.product_id, p.product_type, p.quantity, p.price::text, p.currency,
                   p.amount::text, p.price_source, p.catalog_price::text, p.offer, p.purchase_date, p.expires_date, p.revoked,
                   p.refund, p.refund_share, p.storefront,
                   to_char(p.occurred_at AT TIME ZONE \(unescaped: PaidService.reportingTimeZone(app: "p_app.bundle")), 'YYYY-MM-DD'),
                   coalesce(paid.past_a_year, false)
            FROM page p
            CROSS JOIN (SELECT \(app)::text AS bundle) p_app
            LEFT JOIN paid ON paid.user_id = p.user_id AND paid.transaction_id = p.transaction_id
            ORDER BY p.position, p.event
            """
        var rows: [AuditRow] = []
        try await read {
            let result = try await client.query(query, logger: logger)
            for try await row in result {
                rows.append(try Self.auditRow(row))
            }
        }
        rows = try await proceeds.fill(rows, app: app)
        guard rows.count > limit else { return AuditPage(rows: rows, nextCursor: nil) }
        rows.removeLast()
        let last = rows[rows.count - 1]
        return AuditPage(rows: rows, nextCursor: AuditCursor(app: app, position: last.position, event: last.event))
    }

    static func auditRow(_ row: PostgresRow) throws -> AuditRow {
        let (position, occurredAt, recordedAt, environment, userId, deviceId, event, transactionId, originalTransactionId,
             productId, productType, quantity, price, currency, amount, priceSource, catalogPrice, offer, purchaseDate, expiresDate,
             revoked, refund, refundShare, storefront, reportingDay, pastAYear) = try row.decode(
            (Int64, Date, Date?, String, String, String?, String, String, String, String, String, Int, String?, String?,
             String?, String, String?, String, Date, Date?, Bool, String?, Int?, String?, String, Bool).self
        )
        guard let environmentValue = StoreEnvironment(rawValue: environment), let eventValue = AuditEventKind(rawValue: event),
              let source = UserLedger.Transaction.PriceSource(rawValue: priceSource), let offerValue = UserLedger.Transaction.Offer(rawValue: offer)
        else {
            throw StoreError.integrity("audit_trail row at position \(position) has environment '\(environment)', event '\(event)', price source '\(priceSource)' and offer '\(offer)', which this ledger does not know")
        }
        return AuditRow(
            position: position, occurredAt: occurredAt, recordedAt: recordedAt, environment: environmentValue, userId: userId,
            deviceId: deviceId, event: eventValue, transactionId: transactionId, originalTransactionId: originalTransactionId,
            productId: productId, productType: ProductType(rawValue: productType) ?? .unknown, quantity: quantity, price: price,
            currency: currency, amount: amount, priceSource: source, catalogPrice: catalogPrice, offer: offerValue, purchaseDate: purchaseDate,
            expiresDate: expiresDate, revoked: revoked, refund: refund, refundShare: refundShare, storefront: storefront,
            basis: ProceedsBasis(reportingDay: reportingDay, pastAYear: pastAYear)
        )
    }

    // MARK: Totals

    /// Totals of the rows the filter selects, by currency and the chosen groupings, ordered by
    /// day, product, currency, environment and storefront (nil currency last).
    public func summary(app: String, filter: AuditFilter = AuditFilter(), groupBy requested: Set<AuditGrouping> = []) async throws -> [AuditSummaryRow] {
        try filter.validate()
        let groupBy = AuditGrouping.effective(requested, for: filter)
        // Fixed expressions chosen by an enum, never input.
        let day = groupBy.contains(.day) ? "to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')" : "NULL::text"
        let productKey = groupBy.contains(.product) ? "product_id" : "NULL::text"
        let environmentKey = groupBy.contains(.environment) ? "environment" : "NULL::text"
        let storefrontKey = groupBy.contains(.storefront) ? "storefront" : "NULL::text"
        let (taken, givenBack) = (AuditEventKind.stored(.taken), AuditEventKind.stored(.givenBack))
        // Parts share a group and all their proceeds depend on; a prorated refund is a part of its
        // own, so that its proceeds are rounded as its row's are. Only subscription rows are
        // joined to their year of paid service: the others are added up without it.
        let zone = PaidService.reportingTimeZone(app: "p_app.bundle")
        func part(subscriptions: Bool) -> String {
            """
            SELECT \(day) AS day, \(productKey) AS product_key, r.currency, \(environmentKey) AS environment_key, \(storefrontKey) AS storefront_key,
                   to_char(r.occurred_at AT TIME ZONE \(zone), 'YYYY-MM-DD'), \(subscriptions ? "coalesce(paid.past_a_year, false)" : "false"),
                   r.product_id, r.storefront, r.price::text, r.environment = 'sandbox',
                   (count(*) FILTER (WHERE r.event = ANY($2::text[])))::bigint,
                   coalesce(sum(r.quantity) FILTER (WHERE r.event = ANY($2::text[])), 0)::bigint,
                   coalesce(sum(r.amount) FILTER (WHERE r.event = ANY($2::text[])), 0)::text,
                   (count(*) FILTER (WHERE r.event = ANY($3::text[])))::bigint,
                   coalesce(sum(r.quantity) FILTER (WHERE r.event = ANY($3::text[])), 0)::bigint,
                   coalesce(sum(r.amount) FILTER (WHERE r.event = ANY($3::text[])), 0)::text,
                   (count(*) FILTER (WHERE r.amount IS NULL))::bigint
            FROM \(subscriptions ? "subscription_picked" : "other_picked") r
            CROSS JOIN (SELECT $1::text AS bundle) p_app
            \(subscriptions ? "LEFT JOIN paid ON paid.user_id = r.user_id AND paid.transaction_id = r.transaction_id" : "")
            GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, r.event = ANY($3::text[]), CASE WHEN r.refund = 'prorated' THEN r.position END
            """
        }
        // The first three values bound are $1 (the app), $2 and $3 (the event kinds), which both
        // halves name by number; the filter's values come after them.
        let query: PostgresQuery = """
            WITH binds AS (SELECT \(app)::text, \(taken)::text[], \(givenBack)::text[]),
            subscription_picked AS (
                SELECT * FROM ledger.audit_trail WHERE app = $1 AND product_type = 'auto_renewable'\(conditionsOf: filter)
            ),
            other_picked AS NOT MATERIALIZED (
                SELECT * FROM ledger.audit_trail WHERE app = $1 AND product_type <> 'auto_renewable'\(conditionsOf: filter)
            ),
            subscription_rows AS (
                SELECT \(unescaped: PaidService.subscriptionColumns) FROM ledger.audit_trail
                WHERE app = $1 AND \(unescaped: PaidService.subscriptionConditions)
                  AND user_id IN (SELECT user_id FROM subscription_picked)
            ),
            \(unescaped: PaidService.paidCTE)
            \(unescaped: part(subscriptions: false))
            UNION ALL
            \(unescaped: part(subscriptions: true))
            """
        var parts: [AuditSummaryPart] = []
        try await read {
            for try await row in try await client.query(query, logger: logger) {
                let (day, productKey, currency, environmentKey, storefrontKey, reportingDay, pastAYear, productId, storefront, price, sandbox,
                     purchases, units, gross, refunds, refundedUnits, refundedAmount, unpriced) = try row.decode(
                    (String?, String?, String?, String?, String?, String, Bool, String, String?, String?, Bool, Int, Int, String, Int, Int, String, Int).self
                )
                parts.append(AuditSummaryPart(
                    day: day, productId: productKey, currency: currency, environment: environmentKey.flatMap(StoreEnvironment.init(rawValue:)),
                    storefront: storefrontKey, basis: ProceedsBasis(reportingDay: reportingDay, pastAYear: pastAYear), basisProductId: productId,
                    basisStorefront: storefront, price: price, sandbox: sandbox, purchases: purchases, units: units, gross: gross, refunds: refunds,
                    refundedUnits: refundedUnits, refundedAmount: refundedAmount, unpriced: unpriced
                ))
            }
        }
        return try await proceeds.summarize(parts, app: app)
    }

    // MARK: Catalog gaps

    /// Whether the audit trail has any row of the app.
    public func hasRows(app: String) async throws -> Bool {
        var found = false
        try await read {
            let rows = try await client.query("SELECT 1 FROM ledger.audit_trail WHERE app = \(app) LIMIT 1", logger: logger)
            for try await _ in rows { found = true }
        }
        return found
    }

    /// Products the app sold that its catalog does not define (recorded as `unknown`), by id.
    /// Once the product is defined and the projections catch up, it drops off this list.
    public func unclassified(app: String) async throws -> [UnclassifiedProduct] {
        var products: [UnclassifiedProduct] = []
        let taken = AuditEventKind.stored(.taken)
        try await read {
            let rows = try await client.query(
                """
                SELECT product_id, count(DISTINCT transaction_id), sum(quantity)::bigint, count(DISTINCT user_id),
                       min(purchase_date), max(purchase_date)
                FROM ledger.audit_trail
                WHERE app = \(app) AND product_type = 'unknown' AND event = ANY(\(taken)::text[])
                GROUP BY product_id
                ORDER BY product_id
                """,
                logger: logger
            )
            for try await (productId, transactions, units, users, first, last) in rows.decode((String, Int, Int, Int, Date, Date).self) {
                products.append(UnclassifiedProduct(productId: productId, transactions: transactions, units: units, users: users,
                                                    firstPurchase: first, lastPurchase: last))
            }
        }
        return products
    }

    // MARK: Errors

    /// Runs a read; a view without this version's columns (the new version still building, or no
    /// projection runner yet) is `notReady` rather than SQL.
    func read(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as PSQLError {
            let state = error.ledgerSQLState
            if state == .undefinedColumn || state == .undefinedTable {
                logger.debug("audit trail not ready", metadata: ["ledger.sql_state": "\(state?.rawValue ?? "-")"])
                throw AuditQueryError.notReady
            }
            throw error
        }
    }
}
