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

    /// Points the projection's view (`ledger.<name>`, what readers query) at this version's table.
    /// Dropped and created rather than replaced: another version may add, remove or reorder
    /// columns, which CREATE OR REPLACE VIEW refuses. Run inside the switch's transaction.
    static func pointView(of projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("DROP VIEW IF EXISTS ledger.\(unescaped: projection.name.rawValue)", logger: logger)
        try await connection.query(
            "CREATE VIEW ledger.\(unescaped: projection.name.rawValue) AS SELECT * FROM ledger.\(unescaped: projection.tableName)",
            logger: logger
        )
    }

    /// `app`, `user_id` and the projection's columns, as SQL.
    static func columnDefinitions(_ projection: any UserProjection.Type) -> String {
        (["app text NOT NULL", "user_id text NOT NULL"] + projection.columns.map { "\($0.name) \($0.type)" }).joined(separator: ", ")
    }

    static func commentColumns(_ projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        for column in projection.columns {
            try await connection.query(
                PostgresQuery(unsafeSQL: "COMMENT ON COLUMN ledger.\(projection.tableName).\(column.name) IS '\(column.meaning.replacingOccurrences(of: "'", with: "''"))'"),
                logger: logger
            )
        }
    }
}
