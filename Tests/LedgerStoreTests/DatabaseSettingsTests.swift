import Foundation
@testable import LedgerStore
import LedgerApplication
import LedgerTesting
import NIOSSL
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

@Suite("Database URLs: TLS defaults, no password sent unencrypted, no password shown")
struct DatabaseSettingsTests {
    /// A self-signed authority, for `sslrootcert`.
    static let certificateAuthority = """
        -----BEGIN CERTIFICATE-----
        MIIBiTCCAS+gAwIBAgIUKqurthahZhBZ6VQY91yAmb08jcAwCgYIKoZIzj0EAwIw
        GTEXMBUGA1UEAwwObGVkZ2VyLXRlc3QtY2EwIBcNMjYxMTIyMjI0MzMzWhgPMjEy
        NjEwMjkyMjQzMzNaMBkxFzAVBgNVBAMMDmxlZGdlci10ZXN0LWNhMFkwEwYHKoZI
        zj0CAQYIKoZIzj0DAQcDQgAE1M6wnSUZUIcfjBlvlTs2ch/3G7eeIu4OV3YG4//i
        ltIwtZ9kO71a9YmdE7dBlszLcdkh7NMjnXhSB7fxGP28tqNTMFEwHQYDVR0OBBYE
        FKkaSDSCP0LnBCtesx3dvWOs5/5PMB8GA1UdIwQYMBaAFKkaSDSCP0LnBCtesx3d
        vWOs5/5PMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAImiSB8c
        jUxrEwzqfpRpN27hlqHy8N+68JAPlgqVFNm5AiBjQJCFhKaXjCBJ6+lqbm3wfZaK
        TIKPYHvHMONv8lEc4g==
        -----END CERTIFICATE-----

        """

    static func temporaryFile(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-test-\(UUID().uuidString).pem")
        try Data(text.utf8).write(to: url)
        return url
    }

    // MARK: Defaults

    @Test("without sslmode, a loopback host gets prefer", arguments: ["localhost", "127.0.0.1", "127.8.9.10", "[::1]", "db.localhost"])
    func loopbackPrefers(_ host: String) throws {
        let settings = try DatabaseSettings(url: "postgres://ledger:pw@\(host):5432/ledger")
        #expect(settings.tls == .prefer)
        #expect(settings.allowsUnencrypted, "the password never leaves the machine")
        #expect(try !settings.connectionConfiguration.tls.isEnforced)
    }

    @Test("without sslmode, any other host gets require", arguments: ["db.example.com", "10.0.0.5", "192.168.1.20", "[2001:db8::1]", "128.0.0.1", "localhost.example.com"])
    func othersRequire(_ host: String) throws {
        let settings = try DatabaseSettings(url: "postgres://ledger:pw@\(host):5432/ledger")
        #expect(settings.tls == .require)
        #expect(!settings.allowsUnencrypted)
        #expect(try settings.connectionConfiguration.tls.isEnforced)
        #expect(!settings.host.hasPrefix("["), "PostgreSQL gets the address, not its URL brackets")
    }

    @Test("prefer towards another machine with a password is require: PostgresNIO's prefer would fall back to plaintext")
    func preferNeverFallsBackWithAPassword() throws {
        let remote = try DatabaseSettings(url: "postgres://ledger:pw@db.example.com/ledger?sslmode=prefer")
        #expect(remote.tls == .prefer)
        #expect(!remote.allowsUnencrypted)
        #expect(try remote.connectionConfiguration.tls.isEnforced)
        let withoutPassword = try DatabaseSettings(url: "postgres://ledger@db.example.com/ledger?sslmode=prefer")
        #expect(withoutPassword.allowsUnencrypted, "no password, nothing secret to send")
        #expect(try !withoutPassword.connectionConfiguration.tls.isEnforced)
        #expect(try withoutPassword.connectionConfiguration.tls.isAllowed)
    }

    @Test("only an explicit sslmode=disable turns TLS off towards another machine")
    func disableIsExplicit() throws {
        let settings = try DatabaseSettings(url: "postgres://ledger:pw@db.example.com/ledger?sslmode=disable")
        #expect(settings.tls == .disable)
        #expect(try !settings.connectionConfiguration.tls.isAllowed)
        #expect(settings.url().contains("sslmode=disable"))
    }

    // MARK: Certificates

    @Test("require encrypts without checking the certificate; verify-ca checks the authority; verify-full the host too")
    func certificateChecks() throws {
        let require = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=require")
        guard case .none = require.tlsConfiguration.certificateVerification else {
            Issue.record("require checked the certificate: \(require.tlsConfiguration.certificateVerification)")
            return
        }
        let verifyCA = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-ca")
        #expect(verifyCA.tlsConfiguration.certificateVerification == .noHostnameVerification)
        let verifyFull = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-full")
        #expect(verifyFull.tlsConfiguration.certificateVerification == .fullVerification)
        #expect(verifyFull.tlsConfiguration.trustRoots == .default)
    }

    @Test("sslrootcert names the authorities to trust; with require it checks them, as libpq does")
    func rootCertificate() throws {
        let file = try Self.temporaryFile(Self.certificateAuthority)
        defer { try? FileManager.default.removeItem(at: file) }
        let full = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-full&sslrootcert=\(file.path)")
        #expect(full.rootCertificatePath == file.path)
        #expect(full.tlsConfiguration.trustRoots == .file(file.path))
        #expect(full.tlsConfiguration.certificateVerification == .fullVerification)
        #expect(try full.connectionConfiguration.tls.isEnforced)
        #expect(full.url().contains("sslrootcert="))
        let require = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=require&sslrootcert=\(file.path)")
        #expect(require.tlsConfiguration.certificateVerification == .noHostnameVerification)
    }

    @Test("an sslrootcert that cannot be read is refused when the URL is read, naming the file")
    func unreadableRootCertificate() throws {
        let missing = "/nonexistent/\(UUID().uuidString).pem"
        let error = try #require(throws: StoreError.self) {
            try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-full&sslrootcert=\(missing)")
        }
        #expect(error.message.contains(missing))
        let notPEM = try Self.temporaryFile("this is not a certificate\n")
        defer { try? FileManager.default.removeItem(at: notPEM) }
        #expect(throws: StoreError.self) {
            try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-full&sslrootcert=\(notPEM.path)")
        }
    }

    @Test("TLS that cannot be set up fails the connection's configuration instead of turning TLS off")
    func noSilentDowngrade() throws {
        let file = try Self.temporaryFile(Self.certificateAuthority)
        let settings = try DatabaseSettings(url: "postgres://u:p@db.example.com/x?sslmode=verify-full&sslrootcert=\(file.path)")
        try FileManager.default.removeItem(at: file)
        let error = try #require(throws: StoreError.self) { try settings.connectionConfiguration }
        #expect(error.message.contains("TLS"))
    }

    @Test("modes PostgresNIO cannot honour, and client certificates, are refused with what to use instead", arguments: [
        ("sslmode=allow", "prefer"), ("sslmode=verify", "verify-full"), ("sslcert=/x.pem", "client certificate"),
        ("sslmode=disable&sslrootcert=/x.pem", "drop one"),
    ])
    func refusedParameters(_ query: String, _ advice: String) throws {
        let error = try #require(throws: StoreError.self) {
            try DatabaseSettings(url: "postgres://u:secretpw@db.example.com/x?\(query)")
        }
        #expect(error.message.contains(advice), "\(error.message)")
        #expect(!error.message.contains("secretpw"))
    }

    // MARK: Never shown

    @Test("the password shows in no description, dump or error, even of a URL that does not parse")
    func passwordNeverShown() throws {
        let settings = try DatabaseSettings(url: "postgres://ledger:s3cretpw@db.example.com/ledger")
        var dumped = ""
        dump(settings, to: &dumped)
        for text in ["\(settings)", String(reflecting: settings), dumped, settings.url()] {
            #expect(!text.contains("s3cretpw"), "\(text)")
        }
        #expect(settings.url(showingPassword: true).contains("s3cretpw"), "shown when asked for (ledger db url)")
        // Refused URLs are echoed masked; odd ones Foundation still parses are shown masked.
        for odd in [
            "mysql://ledger:s3cretpw@db/ledger", "ledger:s3cretpw@db/ledger", "postgres://ledger:s3cret pw@db.example.com/ledger",
            "postgres://ledger:s3cret%zz@db.example.com/ledger", "postgres://ledger:s3cret@[db.example.com/ledger",
            "postgres://ledger:s3cret/pw@db.example.com/ledger",
        ] {
            do {
                let parsed = try DatabaseSettings(url: odd)
                #expect(!"\(parsed)".contains("s3cret"), "\(parsed)")
            } catch {
                #expect(!error.message.contains("s3cret"), "\(error.message)")
            }
        }
    }

    // MARK: Against the managed server, which has no TLS

    /// The managed test server has no TLS; a server of `LEDGER_TEST_DATABASE_URL` may have it.
    static let testServerIsManaged = (ProcessInfo.processInfo.environment["LEDGER_TEST_DATABASE_URL"] ?? "").isEmpty

    @Test("require against a server without TLS fails at once, saying so, rather than logging in unencrypted")
    func requireAgainstPlaintextServer() async throws {
        try #require(DatabaseSettingsTests.testServerIsManaged, "this test needs the tests' managed PostgreSQL (no TLS, files under .ledger/tests): unset LEDGER_TEST_DATABASE_URL")
        for mode in [DatabaseSettings.TLSMode.require, .verifyFull] {
            var settings = try await TestDatabase.settings()
            settings.tls = mode
            let started = ContinuousClock.now
            let error = try await #require(throws: StoreError.self) {
                try await LedgerDatabase.withClient(settings, logger: TestDatabase.logger) { client in
                    try await client.query("SELECT 1", logger: TestDatabase.logger).collect().count
                }
            }
            #expect(error.code == .databaseUnavailable)
            #expect(error.message.contains("does not offer TLS"), "\(error.message)")
            #expect(error.message.contains("sslmode=\(mode.rawValue)"))
            #expect(!error.message.contains(settings.password ?? "no password"), "\(error.message)")
            // Not the pool's minute of silent retries (a generous bound for a loaded machine).
            #expect(ContinuousClock.now - started < .seconds(20))
            // The single connection says the same: PostgresNIO refused before any login.
            await #expect(throws: PSQLError.self) {
                try await TestDatabase.withConnection(settings) { _ in }
            }
        }
    }

    @Test("prefer on loopback logs in without TLS when the server has none")
    func preferOnLoopback() async throws {
        var settings = try await TestDatabase.settings()
        settings.tls = .prefer
        let count = try await LedgerDatabase.withClient(settings, logger: TestDatabase.logger) { client in
            try await client.query("SELECT 1", logger: TestDatabase.logger).collect().count
        }
        #expect(count == 1)
    }

    @Test("a server that cannot be reached is named with the system's reason, not NIO's account of every attempt")
    func unreachableServersAreExplained() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        // Something listens, but closes every connection at once: not PostgreSQL.
        let closer = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in channel.close() }
            .bind(host: "127.0.0.1", port: 0).get()
        let closing = try #require(closer.localAddress?.port)
        // Nothing listens: a port just let go.
        let released = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let refusing = try #require(released.localAddress?.port)
        try await released.close()
        defer { closer.close(promise: nil) }

        for (port, reason) in [(refusing, "Connection refused"), (closing, "the other side closed the connection before the login")] {
            var settings = try await TestDatabase.settings()
            settings.port = port
            let error = try await #require(throws: StoreError.self) {
                try await LedgerDatabase.withClient(settings, logger: TestDatabase.logger) { _ in }
            }
            #expect(error.message.contains("cannot reach PostgreSQL at") && error.message.contains(":\(port)"), "\(error.message)")
            #expect(error.message.contains(reason), "\(error.message)")
            #expect(!error.message.contains("SingleConnectionFailure") && !error.message.contains("errno"), "\(error.message)")
        }
    }
}
