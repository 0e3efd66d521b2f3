import Foundation
import LedgerStore
import LocalPostgres
import Logging
import PostgresNIO

/// Shared by the integration test targets.
///
/// A real PostgreSQL for the integration tests: `LEDGER_TEST_DATABASE_URL` when set, otherwise a
/// managed local server of the tests' own, under `.ledger/tests/` (or `$LEDGER_HOME/tests/`), run
/// without flushes to disk since every test database is dropped.
///
/// Every test gets a database of its own, migrated, so tests run in parallel without sharing a
/// log. There is no skipping: when no server can be had, the test fails and says why.
public enum TestDatabase {
    public static let logger: Logger = {
        var logger = Logger(label: "ledger-tests")
        logger.logLevel = ProcessInfo.processInfo.environment["LEDGER_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .warning
        return logger
    }()

    /// The server, found or started once per test process.
    private static let server = Task<DatabaseSettings, any Error> {
        if let url = ProcessInfo.processInfo.environment["LEDGER_TEST_DATABASE_URL"], !url.isEmpty {
            return try DatabaseSettings(url: url)
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var environment = ProcessInfo.processInfo.environment
        let home = environment["LEDGER_HOME"].map { URL(fileURLWithPath: $0) } ?? packageRoot.appendingPathComponent(".ledger")
        // A server of the tests' own, beside the program's (never the program's: its data is kept).
        environment["LEDGER_HOME"] = home.appendingPathComponent("tests").path
        do {
            return try await LocalPostgres(environment: environment, durability: .throwaway).start(logger: logger)
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

    public static func settings() async throws -> DatabaseSettings {
        try await server.value
    }

    /// Runs `body` against a new, migrated database that is dropped afterwards.
    public static func withDatabase<Result: Sendable>(
        _ name: String = #function,
        migrate: Bool = true,
        _ body: @Sendable (PostgresClient, DatabaseSettings) async throws -> Result
    ) async throws -> Result {
        let server = try await settings()
        let slug = name.lowercased().filter { $0.isLetter || $0.isNumber }.prefix(30)
        let database = "test_\(slug)_\(UInt32.random(in: 0...UInt32.max))"
        try await LedgerDatabase.recreate(database: database, on: server, logger: logger)
        let settings = server.with(database: database)
        do {
            let result = try await LedgerDatabase.withClient(settings, maximumConnections: 40, logger: logger) { client in
                if migrate {
                    try await Migrator.bundled().migrate(client, logger: logger)
                }
                return try await body(client, settings)
            }
            try? await LedgerDatabase.drop(database: database, on: server, logger: logger)
            return result
        } catch {
            try? await LedgerDatabase.drop(database: database, on: server, logger: logger)
            throw error
        }
    }

    /// A connection of its own, for holding a transaction open or acting as another session.
    public static func withConnection<Result: Sendable>(
        _ settings: DatabaseSettings,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let connection = try await PostgresConnection.connect(
            configuration: try settings.connectionConfiguration, id: Int.random(in: 1000...9999), logger: logger
        )
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
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
