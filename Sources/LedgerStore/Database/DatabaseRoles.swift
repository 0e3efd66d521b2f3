import LedgerApplication
import Logging
import PostgresNIO

/// The two roles of a ledger's database: the one `ledger serve` runs as, which reads, appends
/// through `ledger.append` and owns nothing, and the owner, which migrates (migration 0007).
///
/// The owner is known for the managed local server, and for another server when
/// `LEDGER_OWNER_DATABASE_URL` names it; without it, commands use the schema as they find it.
public struct DatabaseRoles: Sendable {
    public var runtime: DatabaseSettings
    /// Who migrates and creates scratch databases; nil when only the server's URL was given.
    public var owner: DatabaseSettings?

    public init(runtime: DatabaseSettings, owner: DatabaseSettings?) {
        self.runtime = runtime
        self.owner = owner
    }

    /// Both roles, on another database of the same server.
    public func with(database: String) -> DatabaseRoles {
        DatabaseRoles(runtime: runtime.with(database: database), owner: owner?.with(database: database))
    }

    /// Brings the schema up to date as the owner; with no owner known, checks that no migration is
    /// pending, since the server's role may not change the schema.
    @discardableResult
    public func prepareSchema(logger: Logger) async throws -> Migrator.Report {
        let migrator = try Migrator.bundled()
        guard let owner else {
            let pending = try await LedgerDatabase.withClient(runtime, maximumConnections: 1, logger: logger) { client in
                try await migrator.pending(client, logger: logger)
            }
            guard pending.isEmpty else {
                throw StoreError.migrationFailed(
                    "database \(runtime.database) needs \(pending.count) migration(s) (\(pending.map(\.name).joined(separator: ", "))), and user '\(runtime.username)' may not change the schema: run `ledger migrate` with LEDGER_OWNER_DATABASE_URL (or --owner-database-url) set to the owner's URL"
                )
            }
            return Migrator.Report(applied: [], alreadyApplied: migrator.migrations.count)
        }
        return try await LedgerDatabase.withClient(owner, maximumConnections: 1, logger: logger) { client in
            try await migrator.migrate(client, logger: logger)
        }
    }

    /// Creates (or recreates) a scratch database, owned by the owner, and migrates it.
    public func recreate(database name: String, logger: Logger) async throws -> DatabaseRoles {
        try await LedgerDatabase.recreate(database: name, on: owner ?? runtime, logger: logger)
        let roles = with(database: name)
        try await roles.prepareSchema(logger: logger)
        return roles
    }

    /// Drops a scratch database.
    public func drop(database name: String, logger: Logger) async throws {
        try await LedgerDatabase.drop(database: name, on: owner ?? runtime, logger: logger)
    }
}
