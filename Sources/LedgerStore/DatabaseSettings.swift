import Foundation
import LedgerApplication
import NIOSSL
import PostgresNIO

/// Where the ledger's PostgreSQL is and how to log in, from a `postgres://` URL or the managed server.
public struct DatabaseSettings: Sendable, Hashable {
    public enum TLSMode: String, Sendable, Hashable {
        case disable, prefer, require
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// Settings every session starts with (`statement_timeout` and the like).
    public var sessionSettings: [String: String] = [:]

    /// Limits on every session of the role `ledger serve` runs as: a stuck statement, a lock wait
    /// or a transaction left open cannot hold the log and then the pool for ever. (The managed
    /// server sets them on the role too.) Migrations run as the owner, without them.
    public static let runtimeTimeouts: [String: String] = [
        "statement_timeout": "60s", "lock_timeout": "5s", "idle_in_transaction_session_timeout": "60s",
    ]

    public init(host: String, port: Int, username: String, password: String?, database: String, tls: TLSMode) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// Parses `postgres://user:password@host:port/database?sslmode=disable|prefer|require`.
    public init(url text: String) throws(StoreError) {
        guard let components = URLComponents(string: text),
              components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            throw .invalidDatabaseURL("it must start with postgres:// (got '\(Self.masking(text))')")
        }
        guard let host = components.host, !host.isEmpty else {
            throw .invalidDatabaseURL("it has no host: use postgres://user:password@host:5432/database")
        }
        guard let user = components.user, !user.isEmpty else {
            throw .invalidDatabaseURL("it has no user name: use postgres://user:password@host:5432/database")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else {
            throw .invalidDatabaseURL("it names no database: add /database after the host")
        }
        var tls = TLSMode.prefer
        if let mode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value {
            guard let parsed = TLSMode(rawValue: mode) else {
                throw .invalidDatabaseURL("sslmode '\(mode)' is not one of disable, prefer, require")
            }
            tls = parsed
        }
        self.init(
            host: host,
            port: components.port ?? 5432,
            username: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 },
            database: database.removingPercentEncoding ?? database,
            tls: tls
        )
    }

    /// The same server, another database on it.
    public func with(database: String) -> DatabaseSettings {
        var copy = self
        copy.database = database
        return copy
    }

    /// The URL form; the password is shown only when asked for.
    public func url(showingPassword: Bool = false) -> String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.host = host
        components.port = port
        components.user = username
        if let password { components.password = showingPassword ? password : "****" }
        components.path = "/" + database
        components.queryItems = [URLQueryItem(name: "sslmode", value: tls.rawValue)]
        return components.string ?? "postgres://\(host):\(port)/\(database)"
    }

    public var clientConfiguration: PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database,
            tls: clientTLS
        )
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    public var connectionConfiguration: PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database,
            tls: connectionTLS
        )
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    private var startupParameters: [(String, String)] {
        sessionSettings.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private var clientTLS: PostgresClient.Configuration.TLS {
        switch tls {
        case .disable: .disable
        case .prefer: .prefer(.makeClientConfiguration())
        case .require: .require(.makeClientConfiguration())
        }
    }

    private var connectionTLS: PostgresConnection.Configuration.TLS {
        switch tls {
        case .disable: return .disable
        case .prefer, .require:
            // A context that cannot be built leaves TLS off; `require` then fails at connect time.
            guard let context = try? NIOSSLContext(configuration: .makeClientConfiguration()) else { return .disable }
            return tls == .prefer ? .prefer(context) : .require(context)
        }
    }

    private static func masking(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.password != nil else { return text }
        components.password = "****"
        return components.string ?? text
    }
}
