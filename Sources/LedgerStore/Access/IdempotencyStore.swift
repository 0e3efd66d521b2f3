import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// Remembers the first answer to a client command sent with an `Idempotency-Key`, per app, and what
/// the request was.
///
/// This is not what makes a command happen once: the key is also the deduplication key of the
/// command's first event, so the append is the claim (see `LedgerAPI.idempotent`). A row here
/// only refuses the key with another request and replays the first answer byte for byte. Its
/// insert is its own short transaction, committed before the command runs: the command's append
/// must be the first write of its transaction (the log's gap guard).
public struct IdempotencyStore: IdempotencyRecords, Sendable {
    let client: DatabasePool
    let logger: Logger

    /// Notes `key` for a request whose method, route and body digest to `requestHash`.
    public func claim(app: String, key: String, requestHash: Data) async throws -> IdempotencyClaim {
        let inserted = try await client.query("""
            INSERT INTO ledger.idempotency_keys (app, key, request_hash) VALUES (\(app), \(key), \(requestHash))
            ON CONFLICT (app, key) DO NOTHING RETURNING 1
            """, logger: logger)
        for try await _ in inserted { return .claimed }

        let rows = try await client.query("""
            SELECT request_hash = \(requestHash), status, response FROM ledger.idempotency_keys WHERE app = \(app) AND key = \(key)
            """, logger: logger)
        for try await (sameRequest, status, body) in rows.decode((Bool, Int32?, Data?).self) {
            guard sameRequest else { return .mismatch }
            if let status { return .replay(status: Int(status), body: body ?? Data()) }
            return .claimed
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
