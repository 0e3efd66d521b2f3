import Foundation
import LedgerApplication
import LedgerStore
import LedgerTesting
import LocalPostgres
import Logging
import PostgresNIO
import Testing

@Suite("App Store shared secrets at rest, and what refused keys cost")
struct AppRegistrySecretsTests {
    static let app = "com.example.app"
    static let secret = "0123456789abcdef0123456789abcdef"
    let logger = TestDatabase.logger

    /// The stored row, as the database has it.
    static func row(_ client: DatabasePool, _ app: String = app) async throws -> (plaintext: String?, sealed: Data?, keyID: String?) {
        let rows = try await client.query(
            "SELECT shared_secret, shared_secret_sealed, shared_secret_key_id FROM ledger.apps WHERE bundle_id = \(app)",
            logger: TestDatabase.logger
        ).collect()
        return try #require(rows.first).decode((String?, Data?, String?).self)
    }

    @Test("a shared secret is stored sealed, never in plaintext, and reads back as it was")
    func storedSealed() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "a test key")
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            #expect(try await registry.addApp(Self.app, sharedSecret: Self.secret))
            let stored = try await Self.row(client)
            #expect(stored.plaintext == nil)
            #expect(stored.keyID == secrets.keyID)
            let sealed = try #require(stored.sealed)
            #expect(sealed.range(of: Data(Self.secret.utf8)) == nil)
            #expect(try await registry.sharedSecret(of: Self.app) == Self.secret)
            #expect(try await registry.apps().first?.sharedSecretSealed == true)

            // Registering again without a secret keeps it; with another, replaces it.
            #expect(try await !registry.addApp(Self.app, sharedSecret: nil))
            #expect(try await registry.sharedSecret(of: Self.app) == Self.secret)
            try await registry.addApp(Self.app, sharedSecret: "another-secret")
            #expect(try await registry.sharedSecret(of: Self.app) == "another-secret")
        }
    }

    @Test("without a key, setting a secret is refused and nothing is stored")
    func noKeyNoSecret() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let registry = AppRegistry(client: client, logger: logger)
            let error = try await #require(throws: SecretError.self) { try await registry.addApp(Self.app, sharedSecret: Self.secret) }
            #expect(error.code == .noKey)
            #expect(error.message.contains("LEDGER_SECRET_KEY"))
            #expect(!error.message.contains(Self.secret))
            #expect(try await registry.apps().isEmpty)
            // An app without a secret needs no key.
            #expect(try await registry.addApp(Self.app, sharedSecret: nil))
        }
    }

    @Test("a secret stored in plaintext before sealing keeps working, and is sealed in place with nothing lost")
    func plaintextFromBefore() async throws {
        try await TestDatabase.withDatabase { client, _ in
            // As `ledger apps add` stored it before 0008 (the owner's write: the server's role writes apps through functions now).
            try await TestDatabase.withOwnerConnection(of: client) { owner in
                try await owner.query(
                    "INSERT INTO ledger.apps (bundle_id, shared_secret) VALUES (\(Self.app), \(Self.secret)), ('com.example.nosecret', NULL)",
                    logger: logger
                )
            }
            let withoutKey = AppRegistry(client: client, logger: logger)
            #expect(try await withoutKey.sharedSecret(of: Self.app) == Self.secret)
            #expect(try await withoutKey.sealPlaintextSecrets() == 0, "nothing happens without a key")
            #expect(try await Self.row(client).plaintext == Self.secret)

            let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "a test key")
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            #expect(try await registry.sharedSecret(of: Self.app) == Self.secret, "readable before it is sealed")
            #expect(try await registry.sealPlaintextSecrets() == 1)
            let stored = try await Self.row(client)
            #expect(stored.plaintext == nil && stored.sealed != nil && stored.keyID == secrets.keyID)
            #expect(try await registry.sharedSecret(of: Self.app) == Self.secret)
            #expect(try await registry.sharedSecret(of: "com.example.nosecret") == nil)
            #expect(try await registry.sealPlaintextSecrets() == 0, "sealing twice changes nothing")
        }
    }

    @Test("the database refuses a row holding a plaintext and a sealed secret at once, or a sealed one without its key id")
    func constraints() async throws {
        try await TestDatabase.withDatabase { client, _ in
            await #expect(throws: PSQLError.self) {
                try await client.query("""
                    INSERT INTO ledger.apps (bundle_id, shared_secret, shared_secret_sealed, shared_secret_key_id)
                    VALUES ('com.example.both', 'x', '\\x01'::bytea, 'abc')
                    """, logger: logger)
            }
            await #expect(throws: PSQLError.self) {
                try await client.query(
                    "INSERT INTO ledger.apps (bundle_id, shared_secret_sealed) VALUES ('com.example.nokey', '\\x01'::bytea)", logger: logger
                )
            }
        }
    }

    @Test("a secret that does not open with the configured key is an error naming the key, never a wrong secret, and stays stored")
    func wrongKey() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let original = try SecretSealer(key: SecretSealer.generateKey(), origin: "the original key")
            try await AppRegistry(client: client, logger: logger, secrets: original).addApp(Self.app, sharedSecret: Self.secret)

            let other = try SecretSealer(key: SecretSealer.generateKey(), origin: "LEDGER_SECRET_KEY")
            let registry = AppRegistry(client: client, logger: logger, secrets: other)
            let error = try await #require(throws: SecretError.self) { try await registry.sharedSecret(of: Self.app) }
            #expect(error.code == .unreadableSecret)
            #expect(error.message.contains(original.keyID) && error.message.contains(other.keyID))
            #expect(error.message.contains(Self.app))
            let unreadable = try await registry.unreadableSecrets()
            #expect(unreadable.map(\.app) == [Self.app])

            let noKey = try await #require(throws: SecretError.self) {
                try await AppRegistry(client: client, logger: logger).sharedSecret(of: Self.app)
            }
            #expect(noKey.code == .noKey)
            #expect(noKey.message.contains(original.keyID))

            // Nothing was lost: the right key still opens it.
            #expect(try await AppRegistry(client: client, logger: logger, secrets: original).sharedSecret(of: Self.app) == Self.secret)
        }
    }

    @Test("a malformed token is refused without a query, and a refused well-formed one without another")
    func refusedTokensCostNoQuery() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let owner = try await TestDatabase.ownerSettings(for: settings)
            let registry = AppRegistry(client: client, logger: logger)
            try await registry.addApp(Self.app, sharedSecret: nil)
            let key = try await registry.createKey(app: Self.app, scopes: [.read])
            let wrongSecret = "lk_\(key.key.keyId)_wrong-secret"
            let unknownKey = "lk_0123456789abcdef_anything"
            #expect(try await registry.authenticate(wrongSecret) == nil)
            #expect(try await registry.authenticate(unknownKey) == nil)
            #expect(try await registry.authenticate(key.token)?.keyId == key.key.keyId)

            // Take the keys' table away (as its owner): any lookup now fails loudly.
            try await TestDatabase.withConnection(owner) { try await $0.query("ALTER TABLE ledger.api_keys RENAME TO api_keys_away", logger: logger) }
            for token in ["", "Bearer", "lk_short_x", "lk_0123456789ABCDEF_upper-case-id", "lk_0123456789abcdef_", String(repeating: "x", count: 10_000)] {
                #expect(try await registry.authenticate(token) == nil, "malformed: \(token.prefix(40))")
            }
            #expect(try await registry.authenticate(wrongSecret) == nil, "refused lately: no query")
            #expect(try await registry.authenticate(unknownKey) == nil, "refused lately: no query")
            // A token not refused before is looked up, so a working key is never taken for a refused one.
            await #expect(throws: PSQLError.self) { try await registry.authenticate(key.token) }
            try await TestDatabase.withConnection(owner) { try await $0.query("ALTER TABLE ledger.api_keys_away RENAME TO api_keys", logger: logger) }
        }
    }

    @Test("the managed server's passwords file is mode 0600")
    func managedStateFileIsPrivate() async throws {
        try #require(DatabaseSettingsTests.testServerIsManaged, "this test needs the tests' managed PostgreSQL (no TLS, files under .ledger/tests): unset LEDGER_TEST_DATABASE_URL")
        _ = try await TestDatabase.settings()
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var environment = ProcessInfo.processInfo.environment
        let home = environment["LEDGER_HOME"].map { URL(fileURLWithPath: $0) } ?? packageRoot.appendingPathComponent(".ledger")
        environment["LEDGER_HOME"] = home.appendingPathComponent("tests").path
        let state = LocalPostgres(environment: environment).stateFile
        #expect(PrivateFile.mode(of: state) == 0o600, "\(state.path)")
    }
}
