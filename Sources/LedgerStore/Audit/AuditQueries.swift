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

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
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
            SELECT position, occurred_at, recorded_at, environment, user_id, device_id, event, transaction_id,
                   original_transaction_id, product_id, product_type, quantity, price::text, currency,
                   amount::text, price_source, catalog_price::text, offer, purchase_date, expires_date, revoked,
                   refund, refund_share, storefront
            FROM ledger.audit_trail
            WHERE app = \(app) AND (position, event) > (\(afterPosition), \(afterEvent))\(conditionsOf: filter)
            ORDER BY position, event
            LIMIT \(limit + 1)
            """
        var rows: [AuditRow] = []
        try await read {
            let result = try await client.query(query, logger: logger)
            for try await row in result {
                rows.append(try Self.auditRow(row))
            }
        }
        guard rows.count > limit else { return AuditPage(rows: rows, nextCursor: nil) }
        rows.removeLast()
        let last = rows[rows.count - 1]
        return AuditPage(rows: rows, nextCursor: AuditCursor(app: app, position: last.position, event: last.event))
    }

    static func auditRow(_ row: PostgresRow) throws -> AuditRow {
        let (position, occurredAt, recordedAt, environment, userId, deviceId, event, transactionId, originalTransactionId,
             productId, productType, quantity, price, currency, amount, priceSource, catalogPrice, offer, purchaseDate, expiresDate,
             revoked, refund, refundShare, storefront) = try row.decode(
            (Int64, Date, Date?, String, String, String?, String, String, String, String, String, Int, String?, String?,
             String?, String, String?, String, Date, Date?, Bool, String?, Int?, String?).self
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
            expiresDate: expiresDate, revoked: revoked, refund: refund, refundShare: refundShare, storefront: storefront
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
        let query: PostgresQuery = """
            WITH g AS (
                SELECT \(unescaped: day) AS day, \(unescaped: productKey) AS product_id, currency, \(unescaped: environmentKey) AS environment,
                       \(unescaped: storefrontKey) AS storefront,
                       count(*) FILTER (WHERE event = ANY(\(taken)::text[])) AS purchases,
                       coalesce(sum(quantity) FILTER (WHERE event = ANY(\(taken)::text[])), 0) AS units,
                       coalesce(sum(amount) FILTER (WHERE event = ANY(\(taken)::text[])), 0) AS gross,
                       count(*) FILTER (WHERE event = ANY(\(givenBack)::text[])) AS refunds,
                       coalesce(sum(quantity) FILTER (WHERE event = ANY(\(givenBack)::text[])), 0) AS refunded_units,
                       coalesce(sum(amount) FILTER (WHERE event = ANY(\(givenBack)::text[])), 0) AS refunded_amount,
                       count(*) FILTER (WHERE amount IS NULL) AS unpriced
                FROM ledger.audit_trail
                WHERE app = \(app)\(conditionsOf: filter)
                GROUP BY 1, 2, 3, 4, 5
            )
            SELECT day, product_id, currency, environment, storefront, purchases, units::bigint, gross::text, refunds,
                   refunded_units::bigint, refunded_amount::text, (gross - refunded_amount)::text, unpriced
            FROM g
            ORDER BY day, product_id, currency, environment, storefront
            """
        var rows: [AuditSummaryRow] = []
        try await read {
            for try await row in try await client.query(query, logger: logger) {
                let (day, productId, currency, environment, storefront, purchases, units, gross, refunds, refundedUnits, refundedAmount, net, unpriced) =
                    try row.decode((String?, String?, String?, String?, String?, Int, Int, String, Int, Int, String, String, Int).self)
                rows.append(AuditSummaryRow(
                    day: day, productId: productId, currency: currency, environment: environment.flatMap(StoreEnvironment.init(rawValue:)),
                    storefront: storefront, purchases: purchases, units: units, gross: gross, refunds: refunds, refundedUnits: refundedUnits,
                    refundedAmount: refundedAmount, net: net, unpriced: unpriced
                ))
            }
        }
        return rows
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
