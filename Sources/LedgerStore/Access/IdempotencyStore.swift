import Foundation
import Logging
import PostgresNIO

/// Remembers the first answer to a client command sent with an `Idempotency-Key`, per app.
///
/// The claim is its own short transaction, committed before the command runs: the command's
/// append must be the first write of its transaction (the log's gap guard), and a retry arriving
/// while the first request still runs must see the claim.
public struct IdempotencyStore: Sendable {
    /// What a request under a key should do.
    public enum Claim: Sendable, Hashable {
        /// The key is new (or its first request died): run the command, then `complete` or `release`.
        case claimed
        /// The first request with this key is still running.
        case inProgress
        /// The key was used with another request.
        case mismatch
        /// The first answer, to send again.
        case replay(status: Int, body: Data)
    }

    let client: PostgresClient
    let logger: Logger
    /// A claim older than this whose request never completed (the process died) may be taken over.
    let abandonAfter: Duration

    public init(client: PostgresClient, logger: Logger, abandonAfter: Duration = .seconds(120)) {
        self.client = client
        self.logger = logger
        self.abandonAfter = abandonAfter
    }

    /// Claims `key` for a request whose method, route and body digest to `requestHash`.
    public func claim(app: String, key: String, requestHash: Data) async throws -> Claim {
        let inserted = try await client.query("""
            INSERT INTO ledger.idempotency_keys (app, key, request_hash) VALUES (\(app), \(key), \(requestHash))
            ON CONFLICT (app, key) DO NOTHING RETURNING 1
            """, logger: logger)
        for try await _ in inserted { return .claimed }

        let seconds = Double(abandonAfter.components.seconds)
        let rows = try await client.query("""
            SELECT request_hash = \(requestHash), status, response, created_at < now() - make_interval(secs => \(seconds))
            FROM ledger.idempotency_keys WHERE app = \(app) AND key = \(key)
            """, logger: logger)
        for try await (sameRequest, status, body, abandoned) in rows.decode((Bool, Int32?, Data?, Bool).self) {
            guard sameRequest else { return .mismatch }
            if let status { return .replay(status: Int(status), body: body ?? Data()) }
            guard abandoned else { return .inProgress }
            let taken = try await client.query("""
                UPDATE ledger.idempotency_keys SET created_at = now()
                WHERE app = \(app) AND key = \(key) AND status IS NULL
                  AND created_at < now() - make_interval(secs => \(seconds))
                RETURNING 1
                """, logger: logger)
            for try await _ in taken {
                logger.info("idempotency key taken over from a request that never finished", metadata: ["ledger.app": "\(app)"])
                return .claimed
            }
            return .inProgress
        }
        // Released between the insert and the read: claim again.
        return try await claim(app: app, key: key, requestHash: requestHash)
    }

    /// Stores the answer of the claimed request, for retries.
    public func complete(app: String, key: String, status: Int, body: Data) async throws {
        _ = try await client.query("""
            UPDATE ledger.idempotency_keys SET status = \(Int32(status)), response = \(body), completed_at = now()
            WHERE app = \(app) AND key = \(key)
            """, logger: logger)
    }

    /// Forgets the claim (the request failed in a way a retry may fix, such as a 503).
    public func release(app: String, key: String) async throws {
        _ = try await client.query(
            "DELETE FROM ledger.idempotency_keys WHERE app = \(app) AND key = \(key) AND status IS NULL", logger: logger
        )
    }
}
