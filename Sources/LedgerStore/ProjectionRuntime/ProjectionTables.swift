import Foundation
import LedgerProjections
import Logging
import PostgresNIO

/// The tables and the view of a projection version, as the runner and the rebuilder create and
/// switch them: one definition of each, so the two can never disagree.
enum ProjectionTables {
    /// Runs `body` in one transaction that holds the lock on `ledger.projections`: registering a
    /// version, switching a live one and rebuilding take turns, across processes.
    ///
    /// Locks are taken in one order by everyone who writes a projection: this advisory lock (for
    /// the switches), then the version's row in `ledger.projections`, then its table and view. A
    /// runner's batch takes its row before its table (`ProjectionBatchWriter.write`), so a switch
    /// and a batch wait for each other and never deadlock. Waits are bounded: 2 s for a row (only a
    /// batch holds one, and only the runner waits meanwhile) and, from `lockReadersOut` on, 100 ms
    /// for what readers use. A wait that runs out rolls the transaction back and the whole of `body`
    /// is tried again after a pause, for up to `patience`: the switch waits for a long query,
    /// instead of every reader queueing behind the switch. `body` must therefore do nothing
    /// outside its transaction that a second attempt cannot repeat.
    static func withRegistryLocked<Result: Sendable>(
        _ client: DatabasePool, logger: Logger, patience: Duration = .seconds(30),
        _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let deadline = ContinuousClock.now + patience
        var pause = Duration.milliseconds(50)
        while true {
            do {
                return try await client.withConnection { connection in
                    try await connection.transaction(logger: logger) { connection in
                        // Only runners and rebuilds take it, each for a short while: waited for longer than
                        // the server's role's usual lock_timeout.
                        try await connection.query("SET LOCAL lock_timeout = '60s'", logger: logger)
                        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('ledger.projections'))", logger: logger)
                        try await connection.query("SET LOCAL lock_timeout = '2s'", logger: logger)
                        return try await body(connection)
                    }
                }
            } catch let error as PSQLError where Self.lostLockRace(error) {
                guard ContinuousClock.now + pause < deadline else { throw RegistryBusy(patience: patience) }
                logger.debug("projection switch found its tables in use; trying again", metadata: [
                    "ledger.sql_state": "\(error.serverInfo?[.sqlState] ?? "-")", "ledger.retry_in": "\(pause)",
                ])
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(1))
            }
        }
    }

    // The statements below call the owner's functions of migration 0007: the server's role may
    // not create, rename or drop anything itself, and those functions accept projection tables
    // and views only. Names and types come from the compiled-in projection definitions. Callers
    // collect their rows: a function's error (a refused name, a lock wait that ran out) arrives
    // with them, and would otherwise surface only at the next statement.

    /// Creates a version's table (first dropping one of the name, with `replacing`), writable by the server's role.
    static func createTable(_ projection: any UserProjection.Type, named table: String, replacing: Bool) -> PostgresQuery {
        """
        SELECT ledger.projection_create_table(\(table), \(projection.columns.map(\.name)), \(projection.columns.map(\.type)), \(replacing))
        """
    }

    /// Indexes on the table: by user, and the projection's own. Named (and created only when
    /// missing) for a version's table; unnamed for a rebuild's, which is renamed on switch-over
    /// and whose successor takes the same name.
    static func createIndexes(_ projection: any UserProjection.Type, on table: String, named: Bool) -> [PostgresQuery] {
        ([["app", "user_id"]] + projection.indexes).enumerated().map { index, columns in
            let name: String? = named ? (index == 0 ? "\(table)_user" : "\(table)_\(columns.joined(separator: "_"))") : nil
            return "SELECT ledger.projection_create_index(\(table), \(name), \(columns))"
        }
    }

    static func dropTable(_ table: String) -> PostgresQuery {
        "SELECT ledger.projection_drop_table(\(table))"
    }

    static func renameTable(_ table: String, to name: String) -> PostgresQuery {
        "SELECT ledger.projection_rename_table(\(table), \(name))"
    }

    /// Removes the projection's view (`ledger.<name>`), e.g. before the tables it shows are dropped.
    static func dropView(of projection: any UserProjection.Type) -> PostgresQuery {
        "SELECT ledger.projection_drop_view(\(projection.name.rawValue))"
    }

    /// From here on the transaction locks what readers use (views and live tables), each for
    /// exclusive use: it waits at most 100 ms for a reader to finish, so that a reader arriving
    /// meanwhile queues behind it for no longer than that. Call it just before the first such lock.
    static func lockReadersOut(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("SET LOCAL lock_timeout = '100ms'", logger: logger)
    }

    /// A lock wait that ran out (55P03) or a deadlock PostgreSQL broke (40P01): worth another try.
    static func lostLockRace(_ error: PSQLError) -> Bool {
        let state = error.serverInfo?[.sqlState]
        return state == "55P03" || state == "40P01"
    }

    /// Points the projection's view (`ledger.<name>`, what readers query) at this version's table.
    /// Dropped and created rather than replaced: another version may add, remove or reorder
    /// columns, which CREATE OR REPLACE VIEW refuses (and which would lock readers out just the
    /// same). Run inside the switch's transaction, after `lockReadersOut`.
    static func pointView(of projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        try await lockReadersOut(on: connection, logger: logger)
        // Collected: a function's error (a lock wait that ran out) arrives with its rows.
        _ = try await connection.query(
            "SELECT ledger.projection_point_view(\(projection.name.rawValue), \(projection.tableName))", logger: logger
        ).collect()
    }

    static func commentColumns(_ projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        for column in projection.columns {
            _ = try await connection.query(
                "SELECT ledger.projection_comment_column(\(projection.tableName), \(column.name), \(column.meaning))", logger: logger
            ).collect()
        }
    }
}

/// A switch-over gave up waiting for its locks.
struct RegistryBusy: Error, CustomStringConvertible {
    let patience: Duration

    var description: String {
        "a projection's view or tables stayed in use for over \(patience) (a long query on the view, or a batch of the runner), so nothing was switched: "
            + "run it again once that query has finished (`SELECT pid, now() - xact_start, query FROM pg_stat_activity WHERE state <> 'idle'` lists them)"
    }
}
