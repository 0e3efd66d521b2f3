import Foundation
import LedgerApplication
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import Logging
import PostgresNIO
import Testing

@Suite("What a server keeps in memory (accepted API keys, the projection registry) follows the database's announcements")
struct ChangeFeedTests {
    static let logger = TestDatabase.logger

    /// Runs a change feed on the test database for the duration of `body`, once it listens.
    static func withFeed<T: Sendable>(
        _ client: DatabasePool, _ settings: DatabaseSettings, _ body: @Sendable (ChangeFeed) async throws -> T
    ) async throws -> T {
        // A heartbeat of 5 s, not the server's 1 s: on a loaded machine (the whole suite in parallel)
        // a 1-second heartbeat can go unanswered, and the feed then rightly forgets what it kept,
        // which these tests would read as a key or secret lost from memory.
        let feed = ChangeFeed(configuration: try settings.connectionConfiguration, heartbeat: .seconds(5), logger: logger)
        return try await withRunningServices([feed], logger: logger) {
            // Generous: a loaded machine once kept it from listening for 10 s (its heartbeat, answered
            // later than a second, makes it listen again from the start).
            #expect(try await eventually(timeout: .seconds(60)) { feed.keys.isListening && feed.projections.isListening })
            return try await body(feed)
        }
    }

    @Test("a key accepted once is accepted again from memory; a revocation in another session makes the next request refused")
    func revocationElsewhereForgetsAcceptedKeys() async throws {
        try await TestDatabase.withDatabase { client, settings in
            // Another process (`ledger keys revoke`) has a registry of its own. The app and its keys
            // are made before the feed listens: the app's announcement, delivered late on a loaded
            // machine, would otherwise make the feed forget the keys accepted just after it.
            let elsewhere = AppRegistry(client: client, logger: Self.logger)
            try await elsewhere.addApp("com.example.keys", sharedSecret: nil)
            let issued = try await elsewhere.createKey(app: "com.example.keys", scopes: [.read])
            let other = try await elsewhere.createKey(app: "com.example.keys", scopes: [.read])
            try await Self.withFeed(client, settings) { feed in
                // This server's registry keeps keys.
                let server = AppRegistry(client: client, logger: Self.logger, acceptedKeys: feed.keys)
                #expect(try await server.authenticate(issued.token)?.keyId == issued.key.keyId)
                #expect(try await server.authenticate(other.token)?.keyId == other.key.keyId)
                #expect(feed.keys.count == 2)

                // Kept: the next authentication is answered without the database. Shown by changing
                // the key's stored hash behind the feed's back: only memory still accepts the key.
                try await TestDatabase.withOwnerConnection(of: client) { owner in
                    // (Past the guard that keeps a key's secret as it was made, too.)
                    try await owner.query("ALTER TABLE ledger.api_keys DISABLE TRIGGER api_keys_changed_announced", logger: Self.logger)
                    try await owner.query("ALTER TABLE ledger.api_keys DISABLE TRIGGER api_keys_final", logger: Self.logger)
                    try await owner.query("UPDATE ledger.api_keys SET secret_hash = sha256('x') WHERE key_id = \(other.key.keyId)", logger: Self.logger)
                    try await owner.query("ALTER TABLE ledger.api_keys ENABLE TRIGGER api_keys_final", logger: Self.logger)
                    try await owner.query("ALTER TABLE ledger.api_keys ENABLE TRIGGER api_keys_changed_announced", logger: Self.logger)
                }
                #expect(try await server.authenticate(other.token)?.keyId == other.key.keyId)

                let revoked = ContinuousClock.now
                try await elsewhere.revokeKey(issued.key.keyId)
                #expect(try await eventually(timeout: .seconds(30)) { try await server.authenticate(issued.token) == nil })
                let refusedAfter = revoked.duration(to: .now)
                // Every kept key is forgotten: the other one is checked against its row again.
                #expect(try await server.authenticate(other.token) == nil)
                print("revoked in another session: refused after \(refusedAfter)")
            }
        }
    }

    @Test("an app's shared secret is read once and kept; set again in another session, the next verification reads the new one")
    func sharedSecretsAreKeptUntilTheAppChanges() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let sealer = try SecretSealer(key: SecretSealer.generateKey(), origin: "this test")
            let elsewhere = AppRegistry(client: client, logger: Self.logger, secrets: sealer)
            // Added before the feed listens: their announcements cannot arrive late and clear what is kept below.
            try await elsewhere.addApp("com.example.secret", sharedSecret: "one")
            try await elsewhere.addApp("com.example.none", sharedSecret: nil)
            try await Self.withFeed(client, settings) { feed in
                let server = AppRegistry(client: client, logger: Self.logger, secrets: sealer, acceptedKeys: feed.keys)
                #expect(try await server.sharedSecret(of: "com.example.secret") == "one")
                #expect(try await server.sharedSecret(of: "com.example.none") == nil)

                // Kept: shown by changing the row behind the feed's back, which only memory does not see.
                try await TestDatabase.withOwnerConnection(of: client) { owner in
                    try await owner.query("ALTER TABLE ledger.apps DISABLE TRIGGER apps_changed_announced", logger: Self.logger)
                    try await owner.query(
                        "UPDATE ledger.apps SET shared_secret = 'two', shared_secret_sealed = NULL, shared_secret_key_id = NULL WHERE bundle_id IN ('com.example.secret', 'com.example.none')",
                        logger: Self.logger
                    )
                    try await owner.query("ALTER TABLE ledger.apps ENABLE TRIGGER apps_changed_announced", logger: Self.logger)
                }
                #expect(try await server.sharedSecret(of: "com.example.secret") == "one")
                #expect(try await server.sharedSecret(of: "com.example.none") == nil, "an app without a secret is kept as such")

                // `ledger apps add` with a new secret, in another process: announced, every secret forgotten.
                try await elsewhere.addApp("com.example.secret", sharedSecret: "three")
                #expect(try await eventually(timeout: .seconds(30)) { try await server.sharedSecret(of: "com.example.secret") == "three" })
                #expect(try await server.sharedSecret(of: "com.example.none") == "two")
                await #expect(throws: AccessError.self) { try await server.sharedSecret(of: "com.example.unknown") }
            }
        }
    }

    @Test("keys are kept only while the feed listens; a revocation announced while a check is in flight is not undone by it")
    func keysAreKeptOnlyWhileListening() throws {
        let keys = AcceptedKeys()
        let key = APIKey(keyId: "0123456789abcdef", app: "com.example.app", scopes: [.read], name: nil, createdAt: Date(), revokedAt: nil)
        let hash = Data([1, 2, 3])
        #expect(keys.ticket() == nil)

        keys.listening(generation: 4)
        let ticket = try #require(keys.ticket())
        keys.keep(key, for: hash, ticket: ticket)
        #expect(keys.key(for: hash) == key)

        // A check that began before a revocation was announced keeps nothing.
        let early = try #require(keys.ticket())
        keys.revoked(generation: 5)
        keys.keep(key, for: hash, ticket: early)
        #expect(keys.key(for: hash) == nil)

        // A heartbeat that finds the generation moved (announcements missed) forgets the keys.
        keys.keep(key, for: hash, ticket: try #require(keys.ticket()))
        keys.listening(generation: 5)
        #expect(keys.key(for: hash) == key)
        keys.listening(generation: 7)
        #expect(keys.key(for: hash) == nil)

        // Deaf: nothing kept, nothing answered.
        keys.keep(key, for: hash, ticket: try #require(keys.ticket()))
        keys.deaf()
        #expect(keys.key(for: hash) == nil && keys.ticket() == nil)
    }

    @Test("the board follows checkpoints and statuses another session writes, and starts over when its connection is cut")
    func boardFollowsTheRegistry() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await client.query(
                "INSERT INTO ledger.projections (name, version, status, position) VALUES ('ownership', 1, 'live', 0), ('audit_trail', 1, 'building', 0)",
                logger: Self.logger
            )
            try await Self.withFeed(client, settings) { feed in
                let board = feed.projections
                #expect(try board.readiness(of: [.ownership])?.checkpoint() == 0)
                #expect(board.readiness(of: [.ownership, .auditTrail])?.reached == nil)

                try await client.query("UPDATE ledger.projections SET position = 42 WHERE name = 'ownership'", logger: Self.logger)
                #expect(try await eventually(timeout: .seconds(30)) { board.readiness(of: [.ownership])?.reached == 42 })

                try await client.query(
                    "UPDATE ledger.projections SET status = 'live', position = 40 WHERE name = 'audit_trail'", logger: Self.logger
                )
                #expect(try await eventually(timeout: .seconds(30)) { board.readiness(of: [.ownership, .auditTrail])?.reached == 40 })

                try await client.query(
                    "UPDATE ledger.projections SET status = 'failed', error = 'test', error_position = 41 WHERE name = 'audit_trail'",
                    logger: Self.logger
                )
                #expect(try await eventually(timeout: .seconds(30)) { board.readiness(of: [.auditTrail])?.failed.first?.1 == 41 })

                // Cut the feed's connection: it goes deaf, then listens and loads the registry again.
                try await TestDatabase.withOwnerConnection(of: client) { owner in
                    try await owner.query("""
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE datname = current_database() AND (query LIKE 'LISTEN%' OR query LIKE '%api_key_generation%')
                        """, logger: Self.logger)
                }
                try await client.query("UPDATE ledger.projections SET position = 50 WHERE name = 'ownership'", logger: Self.logger)
                #expect(try await eventually(timeout: .seconds(60)) { board.readiness(of: [.ownership])?.reached == 50 })
            }
        }
    }

    @Test("an announcement older than what the board loaded is ignored, and a checkpoint never moves back in memory")
    func olderAnnouncementsAreIgnored() throws {
        let board = ProjectionBoard()
        #expect(board.readiness(of: [.ownership]) == nil)
        board.load([RegistryRow(name: .ownership, version: 1, state: .live, position: 30, errorPosition: nil, change: 10)])
        board.apply(try #require(RegistryRow(announced: "ownership 1 building 10 - 9".split(separator: " "))))
        #expect(try board.readiness(of: [.ownership])?.checkpoint() == 30)
        board.apply(try #require(RegistryRow(announced: "ownership 1 live 35 - 11".split(separator: " "))))
        #expect(try board.readiness(of: [.ownership])?.checkpoint() == 35)
        board.apply(try #require(RegistryRow(announced: "ownership 2 building 5 - 12".split(separator: " "))))
        board.apply(try #require(RegistryRow(announced: "ownership 1 retired 35 - 13".split(separator: " "))))
        #expect(board.readiness(of: [.ownership])?.building.first?.1 == 5)
        #expect(RegistryRow(announced: "ownership one live 35 - 11".split(separator: " ")) == nil)
        #expect(RegistryRow(announced: "ownership 1 live 35 x 11".split(separator: " ")) == nil)
        board.deaf()
        #expect(board.readiness(of: [.ownership]) == nil)
    }
}
