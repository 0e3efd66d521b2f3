import Foundation
import LedgerApplication
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// Lends out a running client for a database, and creates or drops scratch databases.
public enum LedgerDatabase {
    /// Runs `body` with a connected client; the client stops when `body` returns.
    ///
    /// One connection is made first, alone: a server that cannot be reached, refuses the login or
    /// offers no TLS where the settings demand it is reported at once and in words, where the pool
    /// would retry in silence for a minute and then report only that it gave up.
    public static func withClient<Result: Sendable>(
        _ settings: DatabaseSettings,
        maximumConnections: Int = 20,
        logger: Logger,
        _ body: @Sendable (DatabasePool) async throws -> Result
    ) async throws -> Result {
        try await checkConnection(settings, logger: logger)
        var configuration = settings.clientConfiguration
        configuration.options.maximumConnections = maximumConnections
        let client = DatabasePool(configuration: configuration, backgroundLogger: backgroundLogger(logger))
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            do {
                let result = try await body(client)
                group.cancelAll()
                return result
            } catch {
                group.cancelAll()
                throw Self.explain(error, settings: settings)
            }
        }
    }

    /// The pool's own log: its connection-level chatter only when debugging. Failures still
    /// reach the callers as thrown errors.
    public static func backgroundLogger(_ logger: Logger) -> Logger {
        var background = logger
        background.logLevel = max(logger.logLevel, .error)
        if logger.logLevel <= .debug { background.logLevel = logger.logLevel }
        return background
    }

    /// Creates (or recreates) a database on the same server, e.g. a benchmark's scratch database.
    public static func recreate(database name: String, on settings: DatabaseSettings, logger: Logger) async throws {
        try requireSimpleName(name)
        try await withMaintenanceConnection(settings, logger: logger) { connection in
            try await connection.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)", logger: logger)
            try await connection.query("CREATE DATABASE \(unescaped: name)", logger: logger)
        }
    }

    /// Drops a database if it exists.
    public static func drop(database name: String, on settings: DatabaseSettings, logger: Logger) async throws {
        try requireSimpleName(name)
        try await withMaintenanceConnection(settings, logger: logger) { connection in
            try await connection.query("DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)", logger: logger)
        }
    }

    /// Database names are spliced into DDL (they cannot be bound), so only plain names pass.
    private static func requireSimpleName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 63,
              name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
        else {
            throw StoreError.invalidInput("database name '\(name)' may contain only lower-case letters, digits and '_' (at most 63)")
        }
    }

    /// Connects once with `settings` and hangs up; a failure is explained (`explain`).
    public static func checkConnection(_ settings: DatabaseSettings, logger: Logger) async throws {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: try settings.connectionConfiguration, id: 0, logger: logger
            )
        } catch {
            throw explain(error, settings: settings)
        }
        try? await connection.close()
    }

    private static func withMaintenanceConnection(
        _ settings: DatabaseSettings, logger: Logger, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: settings.with(database: "postgres").connectionConfiguration, id: 0, logger: logger
            )
        } catch {
            throw explain(error, settings: settings)
        }
        do {
            try await body(connection)
        } catch let error as PSQLError where error.ledgerSQLState == .insufficientPrivilege {
            try? await connection.close()
            throw StoreError.databaseUnavailable(
                "user '\(settings.username)' may not create or drop databases on \(settings.host):\(settings.port): grant it CREATEDB"
            )
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// Turns connection failures into a message that says which server could not be reached.
    static func explain(_ error: any Error, settings: DatabaseSettings) -> any Error {
        guard let error = error as? PSQLError else { return error }
        switch error.code {
        case .sslUnsupported:
            let demand = settings.tls == .prefer
                ? "and with sslmode=prefer the ledger sends a password to a host other than loopback only over TLS"
                : "which sslmode=\(settings.tls.rawValue) demands (without sslmode, every host but loopback gets require, so that no password crosses a network unencrypted)"
            return StoreError.databaseUnavailable(
                "PostgreSQL at \(settings.host):\(settings.port) does not offer TLS, \(demand): turn TLS on in the server (ssl = on), or add sslmode=disable to the URL if the network between is trusted"
            )
        case .connectionError where isTLSFailure(error.underlying):
            return StoreError.databaseUnavailable(
                "TLS with PostgreSQL at \(settings.host):\(settings.port) failed (\(error.underlying.map { "\($0)" } ?? "handshake failed")); with sslmode=verify-ca or verify-full the server's certificate must be signed by an authority of sslrootcert (else of the system), and with verify-full it must name \(settings.host)"
            )
        case .connectionError, .serverClosedConnection, .uncleanShutdown:
            return StoreError.databaseUnavailable(
                "cannot reach PostgreSQL at \(settings.url()): \(reason(error)); check that the server runs (ledger db status) or fix LEDGER_DATABASE_URL"
            )
        case .server where error.ledgerSQLState == .invalidPassword || error.ledgerSQLState == .invalidAuthorizationSpecification:
            return StoreError.databaseUnavailable(
                "PostgreSQL at \(settings.host):\(settings.port) refused user '\(settings.username)': wrong password or no access to database '\(settings.database)'"
            )
        case .server where error.ledgerSQLState == .invalidCatalogName:
            return StoreError.databaseUnavailable(
                "database '\(settings.database)' does not exist on \(settings.host):\(settings.port): create it, or fix LEDGER_DATABASE_URL"
            )
        default:
            return error
        }
    }

    /// Why a connection failed: its underlying error's reason, else what the failure's kind says.
    static func reason(_ error: PSQLError) -> String {
        let hungUp = "the other side closed the connection before the login (is PostgreSQL the program at that port?)"
        switch error.underlying {
        case let underlying as IOError where [ECONNRESET, EPIPE].contains(underlying.errnoCode):
            return hungUp
        case let underlying?:
            return reason(underlying)
        case nil:
            return error.code == .serverClosedConnection ? hungUp : "the connection broke off"
        }
    }

    /// Why a connection could not be made, in the system's words ("Connection refused", "the host
    /// name does not resolve"), rather than NIO's description of every attempt.
    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let failure = error.connectionErrors.first { return reason(failure.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name \(error.host) does not resolve" }
            return "\(error)"
        case let error as IOError:
            return String(cString: strerror(error.errnoCode))
        case ChannelError.connectTimeout(let limit):
            return "no answer within \(limit.nanoseconds / 1_000_000_000) s"
        default:
            return "\(error)"
        }
    }

    private static func isTLSFailure(_ error: (any Error)?) -> Bool {
        error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError
    }
}
