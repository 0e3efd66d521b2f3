import Crypto
import Foundation
import LedgerApplication
import LedgerMigrations
import Logging
import PostgresNIO

/// Applies the numbered SQL files of `Migrations/` in order, each once, each in its own transaction.
///
/// Every applied file is recorded with its SHA-256; a file changed after it was applied is refused
/// rather than silently diverging from what the database holds. Two processes migrating at once
/// take turns on an advisory lock, so running `ledger migrate` twice, or from two places, is safe.
public struct Migrator: Sendable {
    /// One migration file.
    public struct Migration: Sendable, Hashable {
        public let version: Int
        public let name: String
        public let sql: String

        public var checksum: String {
            SHA256.hash(data: Data(sql.utf8)).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// What a run did.
    public struct Report: Sendable {
        public let applied: [String]
        public let alreadyApplied: Int

        public init(applied: [String], alreadyApplied: Int) {
            self.applied = applied
            self.alreadyApplied = alreadyApplied
        }
    }

    public let migrations: [Migration]

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// The migrations shipped with the ledger.
    public static func bundled() throws -> Migrator {
        var migrations: [Migration] = []
        for file in MigrationFiles.all() {
            let name = file.lastPathComponent
            guard let version = Int(name.prefix(while: \.isNumber)), name.hasSuffix(".sql") else {
                throw StoreError.migrationFailed("migration file \(name) must be named NNNN_description.sql")
            }
            migrations.append(Migration(version: version, name: name, sql: try String(contentsOf: file, encoding: .utf8)))
        }
        guard !migrations.isEmpty else {
            throw StoreError.migrationFailed("no migration files were found in the ledger's resources: the build is incomplete")
        }
        let versions = migrations.map(\.version)
        guard Set(versions).count == versions.count else {
            throw StoreError.migrationFailed("two migration files share a number: \(migrations.map(\.name).sorted())")
        }
        return Migrator(migrations: migrations)
    }

    /// Brings the database up to date.
    @discardableResult
    public func migrate(_ client: DatabasePool, logger: Logger) async throws -> Report {
        try await client.withConnection { connection in
            try await migrate(connection, logger: logger)
        }
    }

    /// The migrations not applied yet, read without changing anything (any role that may read the schema).
    public func pending(_ client: DatabasePool, logger: Logger) async throws -> [Migration] {
        let exists = try await client.query(
            "SELECT to_regclass('ledger.schema_migrations') IS NOT NULL", logger: logger
        ).collect().first?.decode(Bool.self) ?? false
        guard exists else { return migrations }
        var applied: Set<Int> = []
        for try await version in try await client.query("SELECT version FROM ledger.schema_migrations", logger: logger).decode(Int.self) {
            applied.insert(version)
        }
        return migrations.filter { !applied.contains($0.version) }
    }

    public func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> Report {
        var applied: [String] = []
        var already = 0
        try await connection.transaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7400117)", logger: logger)
            try await Self.createHistoryTable(connection, logger: logger)
        }
        for migration in migrations {
            let didApply = try await connection.transaction(logger: logger) { connection -> Bool in
                // The lock makes a second process wait here, then see the migration as applied.
                try await connection.query("SELECT pg_advisory_xact_lock(7400117)", logger: logger)
                let rows = try await connection.query(
                    "SELECT name, checksum FROM ledger.schema_migrations WHERE version = \(migration.version)",
                    logger: logger
                )
                for try await (name, checksum) in rows.decode((String, String).self) {
                    guard checksum == migration.checksum else {
                        throw StoreError.migrationEdited(
                            "migration \(migration.name) was changed after it was applied to this database (applied as \(name), checksum \(checksum.prefix(12))…, the file now \(migration.checksum.prefix(12))…): restore the file as it was and put the change in a new numbered migration"
                        )
                    }
                    return false
                }
                for statement in SQLScript(migration.sql).statements {
                    do {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    } catch let error as PSQLError {
                        throw StoreError.migrationFailed(
                            "migration \(migration.name) failed and was rolled back: \(error.serverInfo?[.message] ?? String(reflecting: error)) in: \(statement.prefix(120))"
                        )
                    }
                }
                try await connection.query(
                    """
                    INSERT INTO ledger.schema_migrations (version, name, checksum)
                    VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                    """,
                    logger: logger
                )
                return true
            }
            if didApply {
                logger.info("migration applied", metadata: ["ledger.migration": "\(migration.name)"])
                applied.append(migration.name)
            } else {
                already += 1
            }
        }
        return Report(applied: applied, alreadyApplied: already)
    }

    private static func createHistoryTable(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("CREATE SCHEMA IF NOT EXISTS ledger", logger: logger)
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS ledger.schema_migrations (
                version    integer     PRIMARY KEY,
                name       text        NOT NULL,
                checksum   text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            logger: logger
        )
    }
}
