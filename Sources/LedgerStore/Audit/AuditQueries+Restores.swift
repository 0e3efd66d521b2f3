import Foundation
import LedgerApplication
import LedgerDomain
import PostgresNIO

extension AuditQueries {
    /// Non-renewing periods restored to devices (`ledger.device_deliveries`, kind
    /// `subscription_restore`), with the environment of the restored purchase from the audit
    /// trail. The filter's period applies to when the restore was recorded; its product, user and
    /// environment apply as on the audit trail. Event types and currency do not apply to restores.
    public func restores(app: String, filter: AuditFilter = AuditFilter(), after cursor: AuditRestoreCursor? = nil, limit: Int = 1_000) async throws -> AuditRestorePage {
        guard (1...Self.maximumPageSize).contains(limit) else { throw AuditQueryError.invalidLimit(limit, maximum: Self.maximumPageSize) }
        try filter.validate()
        if let cursor, cursor.app != app { throw AuditQueryError.invalidCursor("the cursor was issued for a different app") }
        let query: PostgresQuery = """
            SELECT d.position, d.delivered_at, t.environment, d.user_id, d.device_id, d.transaction_id, d.product_id
            FROM ledger.device_deliveries d
            LEFT JOIN LATERAL (
                SELECT environment FROM ledger.audit_trail a
                WHERE a.app = d.app AND a.user_id = d.user_id AND a.transaction_id = d.transaction_id AND a.event = 'purchase'
                LIMIT 1
            ) t ON true
            WHERE d.app = \(app) AND d.kind = 'subscription_restore'
              AND (d.position, d.device_id, d.transaction_id) > (\(cursor?.position ?? 0), \(cursor?.deviceId ?? ""), \(cursor?.transactionId ?? ""))\(restoreConditionsOf: filter)
            ORDER BY d.position, d.device_id, d.transaction_id
            LIMIT \(limit + 1)
            """
        var rows: [AuditRestore] = []
        try await read {
            for try await (position, restoredAt, environment, userId, deviceId, transactionId, productId) in try await client.query(query, logger: logger)
                .decode((Int64, Date?, String?, String, String, String, String?).self) {
                rows.append(AuditRestore(
                    position: position, restoredAt: restoredAt,
                    environment: environment.flatMap(StoreEnvironment.init(rawValue:)), userId: userId, deviceId: deviceId,
                    transactionId: transactionId, productId: productId
                ))
            }
        }
        guard rows.count > limit else { return AuditRestorePage(rows: rows, nextCursor: nil) }
        rows.removeLast()
        let last = rows[rows.count - 1]
        return AuditRestorePage(rows: rows, nextCursor: AuditRestoreCursor(app: app, position: last.position, deviceId: last.deviceId,
                                                                          transactionId: last.transactionId))
    }
}

extension PostgresQuery.StringInterpolation {
    /// The filter's conditions on restores (`d`, device_deliveries) and their purchase's environment (`t`).
    mutating func appendInterpolation(restoreConditionsOf filter: AuditFilter) {
        if let from = filter.from { appendLiteral(" AND d.delivered_at >= "); appendInterpolation(from) }
        if let to = filter.to { appendLiteral(" AND d.delivered_at < "); appendInterpolation(to) }
        if let product = filter.productId { appendLiteral(" AND d.product_id = "); appendInterpolation(product) }
        if let user = filter.userId { appendLiteral(" AND d.user_id = "); appendInterpolation(user) }
        if let environment = filter.environment.only?.rawValue { appendLiteral(" AND t.environment = "); appendInterpolation(environment) }
    }
}
