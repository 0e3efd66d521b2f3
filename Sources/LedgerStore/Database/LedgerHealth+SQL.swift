import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO

extension LedgerHealth {
    /// Reads the projections and the horizon and judges them.
    public static func read(_ client: DatabasePool, thresholds: Thresholds, logger: Logger) async throws -> LedgerHealth {
        let statuses = try await ProjectionStatus.all(client, logger: logger)
        let holder = try await horizonHolder(client, logger: logger)
        // The status rows carry the head; with no projection registered yet it is read on its own.
        var head = statuses.first?.head
        if head == nil { head = try await PostgresEventStore(client: client, logger: logger).headPosition() }
        return judge(statuses, head: head ?? 0, holder: holder, thresholds: thresholds,
                     notificationSync: try await notificationSync(client, stale: thresholds.syncStale, logger: logger))
    }

    /// Every app with a Server API key, in both environments, with how far its notifications were
    /// checked against Apple's history: one row per app and environment.
    static func notificationSync(_ client: DatabasePool, stale: Duration, logger: Logger) async throws -> [NotificationSync] {
        let rows = try await client.query(
            """
            SELECT a.bundle_id, e.environment, s.synced_through, s.last_run_at, s.last_error,
                   s.synced_through IS NULL OR s.synced_through < now() - make_interval(secs => \(stale.inSeconds))
            FROM ledger.apps a
            CROSS JOIN (VALUES ('production'), ('sandbox')) AS e(environment)
            LEFT JOIN ledger.notification_sync s ON s.app = a.bundle_id AND s.environment = e.environment
            WHERE a.server_api_key_id IS NOT NULL
            ORDER BY a.bundle_id, e.environment
            """,
            logger: logger
        )
        var found: [NotificationSync] = []
        for try await (app, environment, synced, ran, error, behind) in rows.decode((String, String, Date?, Date?, String?, Bool).self) {
            guard let environment = StoreEnvironment(rawValue: environment) else { continue }
            found.append(NotificationSync(app: app, environment: environment, syncedThrough: synced, lastRunAt: ran, lastError: error, behind: behind))
        }
        return found
    }

    /// The session whose transaction is the followers' horizon, if one of this database is running:
    /// the oldest transaction of this database holding a transaction id, as `ledger.follow_horizon()`
    /// counts them. Read from `pg_stat_activity` alone, not compared with the function's answer: the
    /// function may name a transaction of another database that ended between its snapshot and its
    /// look at the sessions, and the health would then lose sight of the real holder for a moment.
    /// `pg_stat_activity` lists the connections (a few hundred at most): constant in the log's size.
    static func horizonHolder(_ client: DatabasePool, logger: Logger) async throws -> HorizonHolder? {
        let rows = try await client.query(
            """
            SELECT a.pid, extract(epoch FROM clock_timestamp() - a.xact_start)::float8, a.usename::text, a.application_name, a.state
            FROM pg_stat_activity a
            WHERE a.datname = current_database()
              AND a.backend_xid IS NOT NULL
              AND a.pid <> pg_backend_pid()
            ORDER BY age(a.backend_xid) DESC
            LIMIT 1
            """,
            logger: logger
        )
        for try await (pid, seconds, user, application, state) in rows.decode((Int32, Double?, String?, String?, String?).self) {
            return HorizonHolder(pid: pid, seconds: seconds.map { max(0, $0) }, user: user, application: application, state: state)
        }
        return nil
    }
}
