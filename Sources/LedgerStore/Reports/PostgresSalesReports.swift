import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// Apple's sales reports in PostgreSQL: the files as received (`ledger.sales_reports`,
/// append-only, content-addressed, migration 0020), and the ledger's side of a reconciliation,
/// read from the live audit trail.
public struct PostgresSalesReports: SalesReportArchive, SalesReads, Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func keep(_ file: SalesReportFileContent) async throws {
        try await client.query(
            """
            INSERT INTO ledger.sales_reports (content_hash, app, report_date, source, content)
            VALUES (\(file.contentHash), \(file.app), \(file.reportDate)::date, \(file.source), \(file.content))
            ON CONFLICT (content_hash) DO NOTHING
            """,
            logger: logger
        )
    }

    /// A kept file's bytes, as received.
    public func content(of contentHash: String) async throws -> Data? {
        let rows = try await client.query("SELECT content FROM ledger.sales_reports WHERE content_hash = \(contentHash)", logger: logger)
        for try await buffer in rows.decode(ByteBuffer.self) { return Data(buffer.readableBytesView) }
        return nil
    }

    public func salesGroups(app: String, from: Date, to: Date, timeZone: String) async throws -> [LedgerSalesGroup] {
        let rows = try await read {
            try await client.query(
                """
                SELECT to_char(occurred_at AT TIME ZONE \(timeZone), 'YYYY-MM-DD'), product_id, storefront, currency, price::text,
                       event = 'refund', environment = 'sandbox', sum(quantity)::bigint,
                       CASE WHEN bool_and(amount IS NOT NULL) THEN sum(amount)::text END,
                       bool_or(offer = 'free_trial'), (count(*) FILTER (WHERE refund = 'prorated'))::bigint
                FROM ledger.audit_trail
                WHERE app = \(app) AND occurred_at >= \(from) AND occurred_at < \(to)
                GROUP BY 1, 2, 3, 4, 5, 6, 7
                """,
                logger: logger
            )
        }
        var groups: [LedgerSalesGroup] = []
        for try await (day, product, storefront, currency, price, refund, sandbox, units, amount, freeTrial, prorated)
            in rows.decode((String, String, String?, String?, String?, Bool, Bool, Int, String?, Bool, Int).self) {
            groups.append(LedgerSalesGroup(
                grain: .init(day: day, productId: product, storefront: storefront, currency: currency, price: price, refund: refund, sandbox: sandbox),
                units: units, amount: amount, freeTrial: freeTrial, prorated: prorated
            ))
        }
        return groups
    }

    public func transactions(app: String, in grain: LedgerSalesGroup.Grain, timeZone: String, limit: Int) async throws -> [String] {
        guard limit > 0 else { return [] }
        let rows = try await read {
            try await client.query(
                """
                SELECT transaction_id FROM ledger.audit_trail
                WHERE app = \(app) AND to_char(occurred_at AT TIME ZONE \(timeZone), 'YYYY-MM-DD') = \(grain.day)
                  AND occurred_at >= (\(grain.day)::date - 1)::timestamp AT TIME ZONE \(timeZone)
                  AND occurred_at < (\(grain.day)::date + 2)::timestamp AT TIME ZONE \(timeZone)
                  AND product_id = \(grain.productId) AND storefront IS NOT DISTINCT FROM \(grain.storefront)
                  AND currency IS NOT DISTINCT FROM \(grain.currency) AND price::text IS NOT DISTINCT FROM \(grain.price)
                  AND (event = 'refund') = \(grain.refund) AND (environment = 'sandbox') = \(grain.sandbox)
                ORDER BY position
                LIMIT \(limit)
                """,
                logger: logger
            )
        }
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    /// A read of the audit trail: `notReady` while its live version is not there yet.
    private func read<Rows>(_ body: () async throws -> Rows) async throws -> Rows {
        do {
            return try await body()
        } catch let error as PSQLError {
            let state = error.ledgerSQLState
            if state == .undefinedColumn || state == .undefinedTable { throw AuditQueryError.notReady }
            throw error
        }
    }
}
