import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// Webhook endpoints, deliveries and attempts in PostgreSQL (migration 0026). Endpoint secrets are
/// stored sealed with `secrets` (`SecretSealer`), bound to the endpoint's id: without a key, no
/// endpoint can be added.
public struct PostgresWebhooks: WebhookStore {
    let client: DatabasePool
    let secrets: SecretSealer?
    let logger: Logger

    public init(client: DatabasePool, secrets: SecretSealer?, logger: Logger) {
        self.client = client
        self.secrets = secrets
        self.logger = logger
    }

    /// What a sealed endpoint secret is bound to: never opens as another endpoint's or an app's.
    static func sealLabel(_ endpointID: String) -> String { "webhook endpoint \(endpointID)" }

    // MARK: Administration

    public func addEndpoint(app: String, url: String, types: [String]?, fromPosition: Int64?, secret: WebhookSecret) async throws -> WebhookEndpoint {
        guard let secrets else { throw SecretError.noKey("the secret of a webhook endpoint is stored sealed") }
        let id = "wh_" + (0..<8).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined()
        let sealed = try secrets.seal(secret.text, app: Self.sealLabel(id))
        // Without a starting position: after everything written so far, as the writer's position says.
        let rows = try await client.query("""
            INSERT INTO ledger.webhook_endpoints (id, app, url, types, secret_sealed, sealed_with, position)
            VALUES (\(id), \(app), \(url), \(types), \(sealed), \(secrets.keyID),
                    coalesce(\(fromPosition)::bigint, (SELECT position FROM ledger.change_writer), 0))
            RETURNING id, app, url, types, position, created_at, removed_at
            """, logger: logger)
        guard let endpoint = try rows.collect().first.map(Self.endpoint) else { throw StoreError.databaseUnavailable("the endpoint was not stored") }
        logger.info("webhook endpoint added", metadata: ["ledger.app": "\(app)", "ledger.webhook_endpoint": "\(id)"])
        return endpoint
    }

    public func endpoints(app: String) async throws -> [WebhookEndpoint] {
        try await client.query("""
            SELECT id, app, url, types, position, created_at, removed_at FROM ledger.webhook_endpoints
            WHERE app = \(app) AND removed_at IS NULL ORDER BY created_at, id
            """, logger: logger).collect().map(Self.endpoint)
    }

    public func endpoint(id: String) async throws -> WebhookEndpoint? {
        try await client.query("""
            SELECT id, app, url, types, position, created_at, removed_at FROM ledger.webhook_endpoints WHERE id = \(id)
            """, logger: logger).collect().first.map(Self.endpoint)
    }

    public func removeEndpoint(id: String) async throws -> WebhookEndpoint? {
        let removed = try await client.query("""
            UPDATE ledger.webhook_endpoints SET removed_at = coalesce(removed_at, now()) WHERE id = \(id)
            RETURNING id, app, url, types, position, created_at, removed_at
            """, logger: logger).collect().first.map(Self.endpoint)
        if let removed { logger.info("webhook endpoint removed", metadata: ["ledger.app": "\(removed.app)", "ledger.webhook_endpoint": "\(id)"]) }
        return removed
    }

    public func deliveries(app: String, endpointID: String?, failedOnly: Bool, limit: Int) async throws -> [WebhookDeliveryRecord] {
        // The latest `limit`, then in log order; "failed": parked, or the last attempt was not a 2xx.
        let rows = try await client.query("""
            SELECT * FROM (
                SELECT d.endpoint_id, d.position, d.seq, d.user_id, d.type, d.status, d.attempts, d.next_attempt_at, d.queued_at, d.delivered_at
                FROM ledger.webhook_deliveries d JOIN ledger.webhook_endpoints e ON e.id = d.endpoint_id
                WHERE e.app = \(app) AND (\(endpointID)::text IS NULL OR d.endpoint_id = \(endpointID)::text)
                  AND (NOT \(failedOnly) OR d.status = 'parked' OR EXISTS (
                      SELECT 1 FROM ledger.webhook_attempts a
                      WHERE a.endpoint_id = d.endpoint_id AND a.position = d.position AND a.seq = d.seq AND a.attempt = d.attempts
                        AND (a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299)))
                ORDER BY d.position DESC, d.seq DESC, d.endpoint_id DESC LIMIT \(limit)
            ) latest ORDER BY position, seq, endpoint_id
            """, logger: logger).collect()
        typealias Row = (String, Int64, Int32, String, String, String, Int32, Date, Date, Date?)
        let deliveries = try rows.map { try $0.decode(Row.self) }
        guard !deliveries.isEmpty else { return [] }
        let attempts = try await client.query("""
            SELECT a.endpoint_id, a.position, a.seq, a.attempt, a.at, a.duration_ms, a.status_code, a.error, a.response
            FROM ledger.webhook_attempts a
            JOIN unnest(\(deliveries.map(\.0))::text[], \(deliveries.map(\.1))::bigint[], \(deliveries.map(\.2))::integer[]) AS k(endpoint_id, position, seq)
              ON k.endpoint_id = a.endpoint_id AND k.position = a.position AND k.seq = a.seq
            ORDER BY a.attempt
            """, logger: logger).collect()
        var history: [String: [WebhookAttempt]] = [:]
        for row in attempts {
            let (endpoint, position, seq, attempt, at, duration, code, error, response) =
                try row.decode((String, Int64, Int32, Int32, Date, Int32, Int32?, String?, String?).self)
            history["\(endpoint) \(position) \(seq)", default: []].append(WebhookAttempt(
                attempt: Int(attempt), at: at, durationMs: Int(duration), statusCode: code.map(Int.init), error: error, response: response
            ))
        }
        return deliveries.map { endpoint, position, seq, user, type, status, count, next, queued, delivered in
            let status = WebhookDeliveryRecord.Status(rawValue: status) ?? .pending
            return WebhookDeliveryRecord(
                endpointId: endpoint, position: position, seq: Int(seq), userId: user, type: type, status: status, attempts: Int(count),
                nextAttemptAt: status == .pending ? next : nil, queuedAt: queued, deliveredAt: delivered,
                history: history["\(endpoint) \(position) \(seq)"] ?? []
            )
        }
    }

    public func resend(endpointID: String, change: WebhookChangeID) async throws -> Bool {
        let rows = try await client.query("""
            UPDATE ledger.webhook_deliveries
            SET status = 'pending', next_attempt_at = now(), delivered_at = NULL, round_start = attempts
            WHERE endpoint_id = \(endpointID) AND position = \(change.position) AND seq = \(Int32(change.seq))
            RETURNING 1
            """, logger: logger).collect()
        if !rows.isEmpty {
            logger.info("webhook delivery resent", metadata: ["ledger.webhook_endpoint": "\(endpointID)", "ledger.change": "\(change)"])
        }
        return !rows.isEmpty
    }

    public func resend(endpointID: String, after position: Int64) async throws -> Int {
        // Up to the endpoint's own position: later changes are queued by the worker as usual.
        let rows = try await client.query("""
            WITH resent AS (
                INSERT INTO ledger.webhook_deliveries (endpoint_id, position, seq, user_id, type, status, next_attempt_at)
                SELECT e.id, c.position, c.seq, c.user_id, c.type, 'pending', now()
                FROM ledger.webhook_endpoints e JOIN ledger.changes c ON c.app = e.app
                WHERE e.id = \(endpointID) AND e.removed_at IS NULL AND c.position > \(position) AND c.position <= e.position
                  AND (e.types IS NULL OR c.type = ANY (e.types))
                ON CONFLICT (endpoint_id, position, seq) DO UPDATE
                SET status = 'pending', next_attempt_at = now(), delivered_at = NULL, round_start = webhook_deliveries.attempts
                RETURNING 1
            )
            SELECT count(*) FROM resent
            """, logger: logger).collect()
        let count = try rows.first?.decode(Int64.self) ?? 0
        logger.info("webhook deliveries resent", metadata: [
            "ledger.webhook_endpoint": "\(endpointID)", "ledger.after": "\(position)", "ledger.count": "\(count)",
        ])
        return Int(count)
    }

    // MARK: Delivery

    public func activeEndpointIDs() async throws -> [String] {
        try await client.query("SELECT id FROM ledger.webhook_endpoints WHERE removed_at IS NULL ORDER BY id", logger: logger)
            .collect().map { try $0.decode(String.self) }
    }

    public func target(endpointID: String) async throws -> WebhookTarget? {
        let rows = try await client.query("""
            SELECT app, url, secret_sealed, sealed_with FROM ledger.webhook_endpoints WHERE id = \(endpointID) AND removed_at IS NULL
            """, logger: logger).collect()
        guard let (app, url, sealed, sealedWith) = try rows.first?.decode((String, String, Data, String).self) else { return nil }
        guard let secrets else { throw SecretError.noKey("the secret of webhook endpoint \(endpointID) is sealed with key \(sealedWith)") }
        let text = try secrets.open(sealed, sealedWith: sealedWith, app: Self.sealLabel(endpointID))
        guard let secret = WebhookSecret(text: text) else {
            throw SecretError.unreadableSecret(app: app, "the secret of webhook endpoint \(endpointID) opened to something that is no whsec_ secret")
        }
        return WebhookTarget(endpointId: endpointID, app: app, url: url, secret: secret)
    }

    public func queue(endpointID: String, limit: Int) async throws -> Int {
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                // The endpoint's row locked: a second queuer (a new leader while the old one ends) waits, then finds the new position.
                let endpoints = try await connection.allRows("""
                    SELECT app, types, position FROM ledger.webhook_endpoints WHERE id = \(endpointID) AND removed_at IS NULL FOR UPDATE
                    """, logger: logger)
                guard let (app, types, from) = try endpoints.first?.decode((String, [String]?, Int64).self) else { return 0 }
                // Every row up to the writer's position is visible once the position is (migration 0026).
                let writer = try await connection.allRows("SELECT position FROM ledger.change_writer", logger: logger)
                let written = try writer.first?.decode(Int64.self) ?? 0
                guard written > from else { return 0 }
                // At most `limit` positions, never splitting one: to the last of them when there were that
                // many (more may follow), else to the writer's position (nothing of the app lies between).
                let bound = try await connection.allRows("""
                    SELECT max(position), count(*) FROM (
                        SELECT DISTINCT position FROM ledger.changes
                        WHERE app = \(app) AND position > \(from) AND position <= \(written) ORDER BY position LIMIT \(limit)
                    ) next
                    """, logger: logger)
                let (last, found): (Int64?, Int64) = try bound.first?.decode((Int64?, Int64).self) ?? (nil, 0)
                let upTo = found >= Int64(limit) ? (last ?? written) : written
                let queued = try await connection.allRows("""
                    WITH queued AS (
                        INSERT INTO ledger.webhook_deliveries (endpoint_id, position, seq, user_id, type, status, next_attempt_at)
                        SELECT \(endpointID), position, seq, user_id, type, 'pending', now() FROM ledger.changes
                        WHERE app = \(app) AND position > \(from) AND position <= \(upTo)
                          AND (\(types)::text[] IS NULL OR type = ANY (\(types)::text[]))
                        ON CONFLICT DO NOTHING
                        RETURNING 1
                    )
                    SELECT count(*) FROM queued
                    """, logger: logger)
                _ = try await connection.allRows(
                    "UPDATE ledger.webhook_endpoints SET position = \(upTo) WHERE id = \(endpointID)", logger: logger
                )
                return Int(try queued.first?.decode(Int64.self) ?? 0)
            }
        }
    }

    public func due(endpointID: String, limit: Int) async throws -> [PendingWebhook] {
        // The earliest pending delivery of each user only, when it is due: per-user order. The heads
        // come from one ordered pass over the endpoint's pending deliveries (the partial index on
        // (endpoint, user, position, seq)), whatever the planner thinks of fresh rows: an anti-join
        // against the same rows, planned on stale statistics, took 8 s for 5,000 pending.
        let rows = try await client.query("""
            SELECT h.position, h.seq, h.user_id, c.body, h.attempts, h.round_start
            FROM (
                SELECT DISTINCT ON (user_id) position, seq, user_id, attempts, round_start, next_attempt_at
                FROM ledger.webhook_deliveries
                WHERE endpoint_id = \(endpointID) AND status = 'pending'
                ORDER BY user_id, position, seq
            ) h
            JOIN ledger.changes c ON c.app = (SELECT app FROM ledger.webhook_endpoints WHERE id = \(endpointID))
                                 AND c.position = h.position AND c.seq = h.seq
            WHERE h.next_attempt_at <= now()
            ORDER BY h.position, h.seq LIMIT \(limit)
            """, logger: logger).collect()
        return try rows.map { row in
            let (position, seq, user, body, attempts, roundStart) = try row.decode((Int64, Int32, String, String, Int32, Int32).self)
            return PendingWebhook(endpointId: endpointID, change: WebhookChangeID(position: position, seq: Int(seq)), userId: user, body: body,
                                  attempts: Int(attempts), roundStart: Int(roundStart))
        }
    }

    public func record(_ answer: WebhookAnswer, of delivery: PendingWebhook, outcome: WebhookAttemptOutcome) async throws {
        let status: String
        var delay: Double = 0
        switch outcome {
        case .delivered: status = "delivered"
        case .parked: status = "parked"
        case .retry(let after):
            status = "pending"
            delay = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
        }
        let milliseconds = Int32(clamping: Int64(answer.duration.components.seconds * 1_000 + answer.duration.components.attoseconds / 1_000_000_000_000_000))
        let code = answer.statusCode.map { Int32(clamping: $0) }
        // One statement: the attempt's number is the delivery's count after it, so two recorders never collide.
        try await client.query("""
            WITH d AS (
                UPDATE ledger.webhook_deliveries
                SET attempts = attempts + 1, status = \(status),
                    next_attempt_at = CASE WHEN \(status) = 'pending' THEN now() + make_interval(secs => \(delay)) ELSE next_attempt_at END,
                    delivered_at = CASE WHEN \(status) = 'delivered' THEN now() ELSE delivered_at END
                WHERE endpoint_id = \(delivery.endpointId) AND position = \(delivery.change.position) AND seq = \(Int32(delivery.change.seq))
                RETURNING attempts
            )
            INSERT INTO ledger.webhook_attempts (endpoint_id, position, seq, attempt, at, duration_ms, status_code, error, response)
            SELECT \(delivery.endpointId), \(delivery.change.position), \(Int32(delivery.change.seq)), d.attempts,
                   now() - make_interval(secs => \(Double(milliseconds) / 1_000)), \(milliseconds), \(code), \(answer.error), \(answer.response)
            FROM d
            """, logger: logger)
    }

    // MARK: Rows

    static func endpoint(_ row: PostgresRow) throws -> WebhookEndpoint {
        let (id, app, url, types, position, createdAt, removedAt) = try row.decode((String, String, String, [String]?, Int64, Date, Date?).self)
        return WebhookEndpoint(id: id, app: app, url: url, types: types, position: position, createdAt: createdAt, removedAt: removedAt)
    }
}
