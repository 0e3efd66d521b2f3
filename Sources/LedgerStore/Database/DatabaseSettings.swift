import Foundation
import LedgerApplication
import LedgerDomain
import NIOSSL
import PostgresNIO

/// Where the ledger's PostgreSQL is and how to log in, from a `postgres://` URL or the managed server.
///
/// TLS takes libpq's `sslmode` names, and one rule of the ledger's own: the password never travels
/// unencrypted to another machine unless the URL says `sslmode=disable`. Without `sslmode`, a
/// loopback host gets `prefer` and any other host `require`; `prefer` towards another machine
/// refuses, rather than falls back to, a server without TLS whenever there is a password to send.
///
/// Its description and mirror show the URL with the password masked, so that logging or dumping
/// the settings never prints it.
public struct DatabaseSettings: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// How the connection is protected, by libpq's `sslmode` names.
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        /// No TLS at all: only by explicit choice (or the managed server, on loopback only).
        case disable
        /// TLS when the server offers it. Without it, an unencrypted connection only to a loopback
        /// host or without a password; otherwise the connection is refused.
        case prefer
        /// TLS or no connection. As in libpq the certificate is not checked (it guards against
        /// listening, not against an impostor), unless `sslrootcert` is given: then as `verify-ca`.
        case require
        /// TLS with a certificate signed by an authority of `sslrootcert` (else the system's).
        case verifyCA = "verify-ca"
        /// As `verify-ca`, and the certificate must be issued for the host connected to.
        case verifyFull = "verify-full"
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
        "statement_timeout": "60s", "lock_timeout": "30s", "idle_in_transaction_session_timeout": "60s",
    ]
    /// A PEM file of the certificate authorities to trust (`sslrootcert`); nil trusts the system's.
    public var rootCertificatePath: String?

    public init(
        host: String, port: Int, username: String, password: String?, database: String, tls: TLSMode,
        rootCertificatePath: String? = nil
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificatePath = rootCertificatePath
    }

    /// Parses `postgres://user:password@host:port/database?sslmode=…&sslrootcert=FILE`.
    ///
    /// `sslmode` is one of disable, prefer, require, verify-ca, verify-full; without it, `prefer`
    /// for a loopback host and `require` for any other. `sslrootcert` must be a readable PEM file.
    public init(url text: String) throws(StoreError) {
        guard let components = URLComponents(string: text),
              components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            throw .invalidDatabaseURL("it must start with postgres:// (got '\(URLRedaction.masked(text))')")
        }
        // An IPv6 literal comes bracketed from some Foundations; PostgreSQL wants the address.
        guard let host = components.host.map(Self.unbracketed), !host.isEmpty else {
            throw .invalidDatabaseURL("it has no host: use postgres://user:password@host:5432/database")
        }
        guard let user = components.user, !user.isEmpty else {
            throw .invalidDatabaseURL("it has no user name: use postgres://user:password@host:5432/database")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else {
            throw .invalidDatabaseURL("it names no database: add /database after the host")
        }
        let parameters = components.queryItems ?? []
        for unsupported in ["sslcert", "sslkey", "sslpassword"] where parameters.contains(where: { $0.name == unsupported }) {
            throw .invalidDatabaseURL("\(unsupported) (a client certificate) is not supported: log in with a password")
        }
        var tls = Self.isLoopback(host) ? TLSMode.prefer : .require
        if let mode = parameters.first(where: { $0.name == "sslmode" })?.value {
            guard let parsed = TLSMode(rawValue: mode) else {
                if mode == "allow" {
                    throw .invalidDatabaseURL("sslmode 'allow' is not supported: use prefer (TLS when the server offers it) or disable")
                }
                throw .invalidDatabaseURL("sslmode '\(mode)' is not one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            tls = parsed
        }
        let rootCertificatePath = parameters.first(where: { $0.name == "sslrootcert" })?.value
        if let rootCertificatePath {
            guard tls != .disable else {
                throw .invalidDatabaseURL("sslrootcert is given but sslmode is disable: drop one of them")
            }
            try Self.checkRootCertificates(rootCertificatePath)
        }
        self.init(
            host: host,
            port: components.port ?? 5432,
            username: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 },
            database: database.removingPercentEncoding ?? database,
            tls: tls,
            rootCertificatePath: rootCertificatePath
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
        components.host = host.contains(":") ? "[\(host)]" : host
        components.port = port
        components.user = username
        if let password { components.password = showingPassword ? password : "****" }
        components.path = "/" + database
        components.queryItems = [URLQueryItem(name: "sslmode", value: tls.rawValue)]
            + (rootCertificatePath.map { [URLQueryItem(name: "sslrootcert", value: $0)] } ?? [])
        return components.string ?? "postgres://\(host):\(port)/\(database)"
    }

    public var description: String { url() }
    public var customMirror: Mirror { Mirror(self, children: ["url": url()]) }

    // MARK: TLS as PostgresNIO takes it

    /// Whether the connection may go ahead unencrypted when the server offers no TLS: with
    /// `disable`, and with `prefer` when nothing secret would cross a network (a loopback host, or
    /// no password). PostgresNIO's own `prefer` always falls back, so the ledger asks it for
    /// `require` in every other case.
    public var allowsUnencrypted: Bool {
        switch tls {
        case .disable: true
        case .prefer: password == nil || Self.isLoopback(host)
        case .require, .verifyCA, .verifyFull: false
        }
    }

    public var clientConfiguration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS = switch self.tls {
        case .disable: .disable
        case _ where allowsUnencrypted: .prefer(tlsConfiguration)
        default: .require(tlsConfiguration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls
        )
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    private var startupParameters: [(String, String)] {
        sessionSettings.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// A single connection's configuration (the LISTEN connection, maintenance), with the same
    /// TLS as the pool's. Throws when TLS cannot be set up (an `sslrootcert` that can no longer be
    /// read), rather than connecting without it.
    public var connectionConfiguration: PostgresConnection.Configuration {
        get throws(StoreError) {
            let tls: PostgresConnection.Configuration.TLS
            if self.tls == .disable {
                tls = .disable
            } else {
                let context: NIOSSLContext
                do {
                    context = try NIOSSLContext(configuration: tlsConfiguration)
                } catch {
                    throw .invalidDatabaseURL("TLS for PostgreSQL at \(host):\(port) cannot be set up (\(error)); check sslrootcert")
                }
                tls = allowsUnencrypted ? .prefer(context) : .require(context)
            }
            var configuration = PostgresConnection.Configuration(
                host: host, port: port, username: username, password: password, database: database, tls: tls
            )
            configuration.options.additionalStartupParameters = startupParameters
            return configuration
        }
    }

    /// How the server's certificate is checked, per `sslmode` and `sslrootcert`.
    var tlsConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificatePath { configuration.trustRoots = .file(rootCertificatePath) }
        configuration.certificateVerification = switch tls {
        case .verifyFull: .fullVerification
        case .verifyCA: .noHostnameVerification
        case .disable, .prefer, .require: rootCertificatePath == nil ? .none : .noHostnameVerification
        }
        return configuration
    }

    // MARK: Helpers

    /// `localhost` (and names under it), 127.0.0.0/8 and ::1: traffic that never leaves the machine.
    public static func isLoopback(_ host: String) -> Bool {
        let name = unbracketed(host).lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") || name == "::1" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    private static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// Reads `sslrootcert` once at parse time, so that a wrong path is reported before any connection.
    private static func checkRootCertificates(_ path: String) throws(StoreError) {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw .invalidDatabaseURL("sslrootcert \(path) cannot be read as PEM certificates (\(error))")
        }
        guard !certificates.isEmpty else {
            throw .invalidDatabaseURL("sslrootcert \(path) holds no PEM certificate")
        }
    }
}
