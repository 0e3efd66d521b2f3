import Foundation
import LedgerProjections
import Logging
import PostgresNIO

/// The tables and the view of a projection version, as the runner and the rebuilder create and
/// switch them: one definition of each, so the two can never disagree.
enum ProjectionTables {
    /// Runs `body` in one transaction that holds the lock on `ledger.projections`: registering a
    /// version, switching a live one and rebuilding take turns, across processes.
    static func withRegistryLocked<Result: Sendable>(
        _ client: PostgresClient, logger: Logger, _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext('ledger.projections'))", logger: logger)
                return try await body(connection)
            }
        }
    }

    // The statements below call the owner's functions of migration 0007: the server's role may
    // not create, rename or drop anything itself, and those functions accept projection tables
    // and views only. Names and types come from the compiled-in projection definitions.

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

    /// Points the projection's view (`ledger.<name>`, what readers query) at this version's table.
    /// Dropped and created rather than replaced: another version may add, remove or reorder
    /// columns, which CREATE OR REPLACE VIEW refuses. Run inside the switch's transaction.
    static func pointView(of projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            "SELECT ledger.projection_point_view(\(projection.name.rawValue), \(projection.tableName))", logger: logger
        )
    }

    static func commentColumns(_ projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        for column in projection.columns {
            try await connection.query(
                "SELECT ledger.projection_comment_column(\(projection.tableName), \(column.name), \(column.meaning))", logger: logger
            )
        }
    }
}
