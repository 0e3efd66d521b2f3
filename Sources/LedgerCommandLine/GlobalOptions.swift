import ArgumentParser
import Foundation
import LedgerApplication
import LedgerStore
import LocalPostgres
import Logging

/// Options every command that talks to the database shares.
public struct GlobalOptions: ParsableArguments, Sendable {
    public init() {}

    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "PostgreSQL URL, postgres://user:password@host:port/database[?sslmode=MODE&sslrootcert=FILE] (default: $LEDGER_DATABASE_URL, else the managed local server). Without sslmode, TLS is required for any host but loopback.",
            valueName: "url"
        )
    )
    public var databaseURL: String?

    @Option(
        name: .customLong("owner-database-url"),
        help: ArgumentHelp(
            "URL of the role that owns the schema and migrates (default: $LEDGER_OWNER_DATABASE_URL, else the managed server's owner). `ledger serve` itself runs as the --database-url role, which may only read and append.",
            valueName: "url"
        )
    )
    public var ownerDatabaseURL: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: $LEDGER_LOG_LEVEL or info).")
    public var logLevel: String?

    /// Sets up logging once and returns the root logger.
    public func makeLogger(label: String = "ledger") throws -> Logger {
        let text = logLevel ?? ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw CommandFailure(message: "log level '\(text)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        LoggingBootstrap.once(level: level)
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// The database to use, as the server's role: the flag, the environment, or the managed local server.
    public func databaseSettings(logger: Logger) async throws -> DatabaseSettings {
        try await databaseRoles(logger: logger).runtime
    }

    /// The server's role and, when known, the owner's.
    public func databaseRoles(logger: Logger) async throws -> DatabaseRoles {
        try await LedgerDatabase.resolveRoles(
            url: resolvedURL,
            ownerURL: ownerDatabaseURL ?? ProcessInfo.processInfo.environment["LEDGER_OWNER_DATABASE_URL"],
            logger: logger
        )
    }

    /// The key that seals App Store shared secrets (`LedgerDatabase.resolveSecrets`); nil when none is configured.
    public func secretSealer() throws -> SecretSealer? {
        do {
            return try LedgerDatabase.resolveSecrets(url: resolvedURL)
        } catch let error as SecretError {
            throw CommandFailure(message: error.message)
        }
    }

    private var resolvedURL: String? {
        databaseURL ?? ProcessInfo.processInfo.environment["LEDGER_DATABASE_URL"]
    }
}

/// Logging goes to standard error, so that standard output carries only results (JSON lines, CSV).
public enum LoggingBootstrap {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var done = false  // guarded by `lock`

    public static func once(level: Logger.Level) {
        lock.withLock {
            guard !done else { return }
            done = true
            LoggingSystem.bootstrap { label in BatchedLogHandler(label: label, level: level) }
        }
    }
}

