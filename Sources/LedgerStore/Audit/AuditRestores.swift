import Foundation
import LedgerDomain
import LedgerProjections
import PostgresNIO

/// A non-renewing subscription period the ledger restored to one of the user's devices: the App
/// Store does not restore these, so each restore is the ledger's own delivery, and finance counts
/// them next to the periods sold.
public struct AuditRestore: Sendable, Hashable, Codable {
    /// Log position of the restore.
    public let position: Int64
    /// When the ledger recorded the restore (nil only for events recorded before the log kept the time).
    public let restoredAt: Date?
    /// The environment of the restored purchase; nil when the audit trail has no purchase row for it.
    public let environment: StoreEnvironment?
    public let userId: String
    /// The device the period was restored to.
    public let deviceId: String
    /// The purchase whose period was restored.
    public let transactionId: String
    public let productId: String?

    public init(position: Int64, restoredAt: Date?, environment: StoreEnvironment?, userId: String, deviceId: String,
                transactionId: String, productId: String?) {
        self.position = position
        self.restoredAt = restoredAt
        self.environment = environment
        self.userId = userId
        self.deviceId = deviceId
        self.transactionId = transactionId
        self.productId = productId
    }

    enum CodingKeys: String, CodingKey { case position, restoredAt, environment, userId, deviceId, transactionId, productId }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let text = try container.decodeIfPresent(String.self, forKey: .restoredAt)
        let restoredAt = text.flatMap(LedgerJSON.parseTimestamp)
        if let text, restoredAt == nil {
            throw DecodingError.dataCorruptedError(forKey: .restoredAt, in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
        }
        self.init(
            position: try container.decode(Int64.self, forKey: .position), restoredAt: restoredAt,
            environment: try container.decodeIfPresent(StoreEnvironment.self, forKey: .environment),
            userId: try container.decode(String.self, forKey: .userId), deviceId: try container.decode(String.self, forKey: .deviceId),
            transactionId: try container.decode(String.self, forKey: .transactionId),
            productId: try container.decodeIfPresent(String.self, forKey: .productId)
        )
    }

    /// Every key present (null when absent), times as ISO 8601 UTC text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(position, forKey: .position)
        try container.encode(restoredAt.map(LedgerJSON.formatTimestamp), forKey: .restoredAt)
        try container.encode(environment, forKey: .environment)
        try container.encode(userId, forKey: .userId)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(productId, forKey: .productId)
    }
}

/// One page of restores, in (position, device, transaction) order.
public struct AuditRestorePage: Sendable {
    public let rows: [AuditRestore]
    /// Where the next page starts; nil when this page is the last.
    public let nextCursor: AuditRestoreCursor?
}

/// Where a page of restores ended: an opaque, URL-safe token carrying the app and the last row's key.
public struct AuditRestoreCursor: Sendable, Hashable {
    let app: String
    let position: Int64
    let deviceId: String
    let transactionId: String

    private struct Payload: Codable {
        let v: Int
        let a: String
        let p: Int64
        let d: String
        let t: String
    }

    init(app: String, position: Int64, deviceId: String, transactionId: String) {
        self.app = app
        self.position = position
        self.deviceId = deviceId
        self.transactionId = transactionId
    }

    /// The cursor a previous page returned, checked against the app being read.
    public init(parsing text: String, app: String) throws(AuditQueryError) {
        guard let payload = AuditCursor.payload(text, as: Payload.self), payload.v == 1, payload.p >= 0 else {
            throw .invalidCursor("the cursor is not one this ledger issued for restores")
        }
        guard payload.a == app else { throw .invalidCursor("the cursor was issued for a different app") }
        self.init(app: app, position: payload.p, deviceId: payload.d, transactionId: payload.t)
    }

    public var text: String { AuditCursor.token(Payload(v: 1, a: app, p: position, d: deviceId, t: transactionId)) }
}

extension AuditCSV {
    public static let restoreHeader = line(["position", "restored_at", "environment", "user_id", "device_id", "transaction_id", "product_id"])

    public static func line(_ row: AuditRestore) -> String {
        line([
            String(row.position), row.restoredAt.map(LedgerJSON.formatTimestamp), row.environment?.rawValue, text(row.userId), text(row.deviceId),
            text(row.transactionId), row.productId.map(text),
        ])
    }
}

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
