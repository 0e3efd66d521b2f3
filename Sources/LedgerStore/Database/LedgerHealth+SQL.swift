import Foundation
import LedgerApplication
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
        return judge(statuses, head: head ?? 0, holder: holder, thresholds: thresholds)
    }

    /// The session whose transaction is the followers' horizon, if one of this database is running.
    /// `pg_stat_activity` lists the connections (a few hundred at most): constant in the log's size.
    static func horizonHolder(_ client: DatabasePool, logger: Logger) async throws -> HorizonHolder? {
        let rows = try await client.query(
            """
            SELECT a.pid, extract(epoch FROM clock_timestamp() - a.xact_start)::float8, a.usename::text, a.application_name, a.state
            FROM pg_stat_activity a
            WHERE a.backend_xid = xid((SELECT ledger.follow_horizon()))
              AND a.pid <> pg_backend_pid()
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
