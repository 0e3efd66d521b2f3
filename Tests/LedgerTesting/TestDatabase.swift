import Foundation
import LedgerStore
import LocalPostgres
import Logging
import PostgresNIO

/// Shared by the integration test targets.
///
/// A real PostgreSQL for the integration tests: `LEDGER_TEST_DATABASE_URL` (the owner's role, with
/// CREATEDB) and `LEDGER_TEST_RUNTIME_DATABASE_URL` (a login member of `ledger_runtime`) when set,
/// otherwise a managed local server of the tests' own, under `.ledger/tests/` (or
/// `$LEDGER_HOME/tests/`), run without flushes to disk since every test database is dropped.
///
/// Every test gets a database of its own, created and migrated by the owner, and works in it as
/// the server's role, as `ledger serve` does; so tests run in parallel without sharing a log, and
/// anything the server's role may not do fails in the tests too. There is no skipping: when no
/// server can be had, the test fails and says why.
public enum TestDatabase {
    public static let logger: Logger = {
        var logger = Logger(label: "ledger-tests")
        logger.logLevel = ProcessInfo.processInfo.environment["LEDGER_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .warning
        return logger
    }()

    /// The server, found or started once per test process.
    private static let server = Task<DatabaseRoles, any Error> {
        if let url = ProcessInfo.processInfo.environment["LEDGER_TEST_DATABASE_URL"], !url.isEmpty {
            guard let runtimeURL = ProcessInfo.processInfo.environment["LEDGER_TEST_RUNTIME_DATABASE_URL"], !runtimeURL.isEmpty else {
                throw TestDatabaseUnavailable(reason: "LEDGER_TEST_DATABASE_URL (the owner) is set but LEDGER_TEST_RUNTIME_DATABASE_URL (a login role that is a member of ledger_runtime) is not")
            }
            var runtime = try DatabaseSettings(url: runtimeURL)
            runtime.sessionSettings = DatabaseSettings.runtimeTimeouts
            return DatabaseRoles(runtime: runtime, owner: try DatabaseSettings(url: url))
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var environment = ProcessInfo.processInfo.environment
        let home = environment["LEDGER_HOME"].map { URL(fileURLWithPath: $0) } ?? packageRoot.appendingPathComponent(".ledger")
        // A server of the tests' own, beside the program's (never the program's: its data is kept).
        environment["LEDGER_HOME"] = home.appendingPathComponent("tests").path
        do {
            let local = LocalPostgres(environment: environment, durability: .throwaway)
            let runtime = try await local.start(logger: logger)
            return DatabaseRoles(runtime: runtime, owner: try local.ownerSettings())
        } catch {
            throw TestDatabaseUnavailable(reason: "\(error)")
        }
    }

    struct TestDatabaseUnavailable: Error, CustomStringConvertible {
        let reason: String
        var description: String {
            "integration tests need PostgreSQL and none could be started: \(reason). Install PostgreSQL server binaries (apt-get install postgresql-15) or set LEDGER_TEST_DATABASE_URL."
        }
    }

    /// The server's role on the test server.
    public static func settings() async throws -> DatabaseSettings {
        try await server.value.runtime
    }

    /// The owner's settings for the database `settings` names: for what only the owner may do,
    /// such as tampering with the log to prove it is noticed.
    public static func ownerSettings(for settings: DatabaseSettings) async throws -> DatabaseSettings {
        try await owner().with(database: settings.database)
    }

    private static func owner() async throws -> DatabaseSettings {
        guard let owner = try await server.value.owner else { throw TestDatabaseUnavailable(reason: "the test server has no owner role") }
        return owner
    }

    /// Runs `body` against a new, migrated database that is dropped afterwards.
    /// `sessionSettings` are set on the server's role's sessions besides its usual ones (a short
    /// `lock_timeout`, say).
    public static func withDatabase<Result: Sendable>(
        _ name: String = #function,
        migrate: Bool = true,
        sessionSettings: [String: String] = [:],
        _ body: @Sendable (DatabasePool, DatabaseSettings) async throws -> Result
    ) async throws -> Result {
        let server = try await server.value
        let owner = try await owner()
        let slug = name.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(30)
        let database = "test_\(slug)_\(UInt32.random(in: 0...UInt32.max))"
        try await LedgerDatabase.recreate(database: database, on: owner, logger: logger)
        var runtime = server.runtime.with(database: database)
        runtime.sessionSettings.merge(sessionSettings) { $1 }
        let settings = runtime
        do {
            if migrate {
                try await LedgerDatabase.withClient(owner.with(database: database), maximumConnections: 1, logger: logger) { client in
                    try await Migrator.bundled().migrate(client, logger: logger)
                }
            }
            let result = try await LedgerDatabase.withClient(settings, maximumConnections: 40, logger: logger) { client in
                try await body(client, settings)
            }
            try? await LedgerDatabase.drop(database: database, on: owner, logger: logger)
            return result
        } catch {
            try? await LedgerDatabase.drop(database: database, on: owner, logger: logger)
            throw error
        }
    }

    /// A connection as the owner of the database `client` works in: for what the server's role may
    /// not do, such as tampering with the log to prove that it is noticed.
    @discardableResult
    public static func withOwnerConnection<Result: Sendable>(
        of client: DatabasePool,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let database = try await client.query("SELECT current_database()", logger: logger).collect()[0].decode(String.self)
        return try await withConnection(try await ownerSettings(for: settings().with(database: database)), body)
    }

    /// A connection of its own, for holding a transaction open or acting as another session.
    ///
    /// Its transactions may stay idle as long as the test needs: the server's role ends a session
    /// idle in a transaction after a minute, a loaded machine can make a test hold one that long,
    /// and postgres-nio never answers a statement written to a session PostgreSQL has ended, so
    /// the test's COMMIT would wait forever (a CI run hung so, its suite never ending).
    public static func withConnection<Result: Sendable>(
        _ settings: DatabaseSettings,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await PostgresConnection.connect(
            configuration: try settings.connectionConfiguration, id: Int.random(in: 1000...9999), logger: logger
        )
        do {
            try await connection.query("SET idle_in_transaction_session_timeout = 0", logger: logger)
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

extension TestDatabase {
    /// Begins a transaction on `connection` and appends one event to `stream` through
    /// `ledger.append` without committing: an append still running, for the caller to COMMIT or
    /// ROLLBACK. Returns the position it took.
    @discardableResult
    public static func beginAppend(on connection: PostgresConnection, stream: String, data: String = "{}") async throws -> Int64 {
        try await connection.query("BEGIN", logger: logger)
        let rows = try await connection.query(
            """
            SELECT "position" FROM ledger.append(\(stream), NULL, ARRAY[gen_random_uuid()],
                ARRAY['PurchaseRecorded.v1'], ARRAY[\(data)], ARRAY['{}'], ARRAY[NULL::text])
            """,
            logger: logger
        ).collect()
        return try rows[0].decode(Int64.self)
    }
}

/// Polls `condition` until it holds or `timeout` passes; a generous bound, not a speed claim.
public func eventually(
    timeout: Duration = .seconds(30),
    _ condition: @Sendable () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
