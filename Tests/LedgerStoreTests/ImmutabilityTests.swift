import LedgerTesting
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import PostgresNIO
import Testing

@Suite("The log cannot be changed, and changes made behind its back are found")
struct ImmutabilityTests {
    private func seed(_ client: DatabasePool) async throws -> PostgresEventStore {
        let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
        for user in ["alice", "bob"] {
            for index in 0..<3 {
                _ = try await store.append([try .purchase("\(user)-\(index)")], to: StreamID.user(app: "app", user: user), expecting: .any)
            }
        }
        return store
    }

    private func sqlState(of statement: String, on client: DatabasePool) async throws -> String? {
        do {
            try await client.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger)
            return nil
        } catch let error as PSQLError {
            return error.serverInfo?[.sqlState]
        }
    }

    @Test("UPDATE, DELETE and TRUNCATE are refused for the ledger's role")
    func refusedByPrivileges() async throws {
        try await TestDatabase.withDatabase { client, _ in
            _ = try await seed(client)
            // 42501: insufficient privilege. The role that owns the table has given these up.
            #expect(try await sqlState(of: "UPDATE ledger.events SET data = '{}'", on: client) == "42501")
            #expect(try await sqlState(of: "DELETE FROM ledger.events", on: client) == "42501")
            #expect(try await sqlState(of: "TRUNCATE ledger.events", on: client) == "42501")
            let count = try await client.query("SELECT count(*) FROM ledger.events", logger: TestDatabase.logger).collect()
            #expect(try count[0].decode(Int.self) == 6)
        }
    }

    @Test("even for the owner, with every privilege, the triggers refuse every change")
    func refusedByTriggers() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await seed(client)
            let statements = ["UPDATE ledger.events SET data = '{}'", "DELETE FROM ledger.events WHERE stream_version = 1", "TRUNCATE ledger.events"]
            let states = try await LedgerDatabase.withClient(try await TestDatabase.ownerSettings(for: settings), maximumConnections: 1,
                                                             logger: TestDatabase.logger) { owner in
                try await owner.query("GRANT UPDATE, DELETE, TRUNCATE ON ledger.events TO CURRENT_USER", logger: TestDatabase.logger)
                var states: [String?] = []
                for statement in statements { states.append(try await sqlState(of: statement, on: owner)) }
                return states
            }
            // LW003: the append-only trigger.
            #expect(states == ["LW003", "LW003", "LW003"])
            let count = try await client.query("SELECT count(*) FROM ledger.events", logger: TestDatabase.logger).collect()
            #expect(try count[0].decode(Int.self) == 6)
        }
    }

    /// What a determined administrator (the owner; the server's role cannot) could do: switch the
    /// triggers off and edit rows.
    private func tamper(_ client: DatabasePool, _ statement: String) async throws {
        let settings = try await client.withConnection { connection in
            try await connection.query("SELECT current_database()", logger: TestDatabase.logger).collect()[0].decode(String.self)
        }
        let owner = try await TestDatabase.ownerSettings(for: TestDatabase.settings().with(database: settings))
        try await TestDatabase.withConnection(owner) { connection in
            try await connection.query("GRANT UPDATE, DELETE ON ledger.events TO CURRENT_USER", logger: TestDatabase.logger)
            try await connection.query("ALTER TABLE ledger.events DISABLE TRIGGER USER", logger: TestDatabase.logger)
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger)
            try await connection.query("ALTER TABLE ledger.events ENABLE TRIGGER USER", logger: TestDatabase.logger)
        }
    }

    @Test("an intact log verifies")
    func intact() async throws {
        try await TestDatabase.withDatabase { client, _ in
            _ = try await seed(client)
            let report = try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify()
            #expect(report.isIntact)
            #expect(report.eventsChecked == 6)
            #expect(report.streamsChecked == 2)
        }
    }

    @Test("an altered payload is found at its stream and position")
    func alteredPayload() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            let target = try await store.readStream(StreamID.user(app: "app", user: "bob"), fromVersion: 2, limit: 1)[0]
            try await tamper(client, #"UPDATE ledger.events SET data = jsonb_set(data, '{quantity}', '100') WHERE "position" = \#(target.position)"#)
            let report = try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify()
            let first = try #require(report.firstBreak)
            #expect(first.streamID == "user/app/bob")
            #expect(first.position == target.position)
            #expect(report.breaks.count == 1, "alice's stream is untouched")
        }
    }

    @Test("an altered row whose hash was recomputed breaks the chain at the next event")
    func rehashedRow() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            let stream = try StreamID.user(app: "app", user: "alice")
            let events = try await store.readStream(stream, fromVersion: 1, limit: 10)
            try await tamper(client, """
                UPDATE ledger.events e SET recorded_at = e.recorded_at - interval '1 day',
                    hash = sha256(coalesce((SELECT p.hash FROM ledger.events p WHERE p.stream_id = e.stream_id AND p.stream_version = e.stream_version - 1), '\\x'::bytea)
                        || ledger.event_content(e.position, e.stream_id, e.stream_version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at - interval '1 day', e.dedup_key))
                WHERE e."position" = \(events[0].position)
                """)
            let report = try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify()
            #expect(report.firstBreak?.position == events[1].position)
            #expect(report.firstBreak?.streamID == stream.rawValue)
        }
    }

    @Test("a removed event is found as a version gap")
    func removedRow() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            let stream = try StreamID.user(app: "app", user: "bob")
            let events = try await store.readStream(stream, fromVersion: 1, limit: 10)
            try await tamper(client, #"DELETE FROM ledger.events WHERE "position" = \#(events[1].position)"#)
            let report = try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify()
            let first = try #require(report.firstBreak)
            #expect(first.position == events[2].position)
            #expect(first.reason.contains("missing"))
        }
    }
}
