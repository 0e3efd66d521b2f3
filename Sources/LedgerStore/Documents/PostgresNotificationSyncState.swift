import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO

/// `ledger.notification_sync` (migration 0019).
public struct PostgresNotificationSyncState: NotificationSyncState {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func syncedThrough(app: String, environment: StoreEnvironment) async throws -> Date? {
        let rows = try await client.query(
            "SELECT synced_through FROM ledger.notification_sync WHERE app = \(app) AND environment = \(environment.rawValue)", logger: logger
        )
        for try await date in rows.decode(Date?.self) { return date }
        return nil
    }

    public func record(_ walk: NotificationSyncWalk) async throws {
        // The instant only moves forward: a walk from an older `--since` never moves it back.
        try await client.query("""
            INSERT INTO ledger.notification_sync (app, environment, synced_through, last_run_at, last_error, seen, recovered)
            VALUES (\(walk.app), \(walk.environment.rawValue), \(walk.syncedThrough), now(), \(walk.error), \(Int64(walk.seen)), \(Int64(walk.recovered)))
            ON CONFLICT (app, environment) DO UPDATE SET
                synced_through = GREATEST(ledger.notification_sync.synced_through, EXCLUDED.synced_through),
                last_run_at = EXCLUDED.last_run_at, last_error = EXCLUDED.last_error,
                seen = CASE WHEN EXCLUDED.last_error IS NULL THEN EXCLUDED.seen ELSE ledger.notification_sync.seen END,
                recovered = CASE WHEN EXCLUDED.last_error IS NULL THEN EXCLUDED.recovered ELSE ledger.notification_sync.recovered END
            """, logger: logger)
    }
}
