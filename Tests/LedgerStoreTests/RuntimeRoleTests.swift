import Foundation
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

/// The role `ledger serve` runs as may read and append, and nothing else that could change what
/// the log holds: every way to alter or remove a recorded event, or the means that guard it, is
/// tried as that role and refused.
@Suite("The server's role can append and read, and cannot change history")
struct RuntimeRoleTests {
    private func seed(_ client: DatabasePool) async throws {
        let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
        for user in ["alice", "bob"] {
            for index in 0..<2 {
                _ = try await store.append([try .purchase("\(user)-\(index)")], to: StreamID.user(app: "app", user: user), expecting: .any)
            }
        }
    }

    /// Runs `statement` on a connection of its own; the SQLSTATE it failed with, or nil when it ran.
    private func failure(of statement: String, on client: DatabasePool) async throws -> String? {
        do {
            try await client.withConnection { connection in
                // Collected: a function's error arrives with its rows.
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger).collect()
            }
            return nil
        } catch let error as PSQLError {
            return error.serverInfo?[.sqlState] ?? "\(error.code)"
        }
    }

    @Test("every way to change or remove a recorded event fails for the server's role")
    func historyCannotBeChanged() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await seed(client)
            let before = try await digest(client)
            let attempts = [
                // The rows themselves.
                "UPDATE ledger.events SET data = '{}'",
                "DELETE FROM ledger.events",
                "TRUNCATE ledger.events",
                #"INSERT INTO ledger.events SELECT * FROM ledger.events LIMIT 1"#,
                "UPDATE ledger.receipts SET receipt_data = 'x'",
                "DELETE FROM ledger.receipt_answers",
                "TRUNCATE ledger.receipts",
                // Taking the rights back (a GRANT without the right to grant only warns: its effect is checked below).
                "GRANT ledger_owner TO CURRENT_USER",
                "SET ROLE ledger_owner",
                // The guards.
                "ALTER TABLE ledger.events DISABLE TRIGGER USER",
                "DROP TRIGGER events_refuse_update_delete ON ledger.events",
                "ALTER TABLE ledger.events OWNER TO CURRENT_USER",
                """
                CREATE OR REPLACE FUNCTION ledger.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$
                """,
                """
                CREATE OR REPLACE FUNCTION ledger.append(p_stream_id text, p_expected bigint, p_event_ids uuid[], p_event_types text[],
                    p_data text[], p_metadata text[], p_dedup_keys text[], p_check_duplicates boolean DEFAULT false)
                RETURNS TABLE (event_id uuid, "position" bigint, stream_id text, stream_version bigint, duplicate boolean, dedup_key text)
                LANGUAGE sql AS $$ SELECT NULL::uuid, 0::bigint, ''::text, 0::bigint, false, NULL::text $$
                """,
                "ALTER FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) SECURITY INVOKER",
                "SELECT setval('ledger.events_position_seq', 1)",
                // The schema and the tables.
                "DROP SCHEMA ledger CASCADE",
                "DROP TABLE ledger.events",
                "ALTER TABLE ledger.events RENAME TO events_old",
                "CREATE TABLE ledger.shadow (x int)",
                "CREATE SCHEMA shadow",
                "DROP VIEW ledger.ownership",
                // The owner's projection functions reach projection tables only.
                "SELECT ledger.projection_drop_table('events')",
                "SELECT ledger.projection_rename_table('events', 'x_v1')",
                "SELECT ledger.projection_drop_view('events')",
                "SELECT ledger.projection_point_view('events', 'events_v1')",
                "SELECT ledger.projection_create_table('receipts', ARRAY['x'], ARRAY['text'], true)",
                "SELECT ledger.projection_create_table('evil_v1', ARRAY['x'], ARRAY['text); DROP TABLE ledger.events; --'], true)",
                "SELECT ledger.projection_create_index('events_v1', 'x; DROP TABLE ledger.events', ARRAY['x'])",
            ]
            var ran: [String] = []
            for statement in attempts {
                if try await failure(of: statement, on: client) == nil { ran.append(statement) }
            }
            #expect(ran.isEmpty, "the server's role could run: \(ran)")
            for table in ["events", "receipts", "receipt_answers"] {
                try await client.query(PostgresQuery(unsafeSQL: "GRANT UPDATE, DELETE, TRUNCATE ON ledger.\(table) TO CURRENT_USER"),
                                       logger: TestDatabase.logger)
                let rights = try await client.query(PostgresQuery(unsafeSQL: """
                    SELECT has_table_privilege('ledger.\(table)', 'UPDATE') OR has_table_privilege('ledger.\(table)', 'DELETE')
                        OR has_table_privilege('ledger.\(table)', 'TRUNCATE')
                    """), logger: TestDatabase.logger).collect()[0].decode(Bool.self)
                #expect(!rights, "granting itself rights on ledger.\(table) changed nothing")
            }
            #expect(try await digest(client) == before, "the log is as it was")

            // It owns nothing in its database, and is no superuser.
            let owned = try await client.query("""
                SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE pg_get_userbyid(c.relowner) = current_user OR n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                """, logger: TestDatabase.logger).collect()[0].decode(Int.self)
            #expect(owned == 0)
            let (superuser, createDB, createRole) = try await client.query(
                "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user", logger: TestDatabase.logger
            ).collect()[0].decode((Bool, Bool, Bool).self)
            #expect(!superuser && !createDB && !createRole)
            #expect(settings.username != (try await TestDatabase.ownerSettings(for: settings)).username)
        }
    }

    @Test("the server's role appends through ledger.append, reads, and keeps its projections")
    func appendsAndReads() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let result = try await store.append([try .purchase("carol-1")], to: StreamID.user(app: "app", user: "carol"), expecting: .noStream)
            #expect(result.appendedCount == 1)
            let read = try await store.readStream(StreamID.user(app: "app", user: "carol"), fromVersion: 1, limit: 10)
            #expect(read.count == 1)
            // Projection tables come and go through the owner's functions, and the runner writes them.
            try await client.query("SELECT ledger.projection_create_table('scratch_v1', ARRAY['n'], ARRAY['bigint NOT NULL'], true)",
                                   logger: TestDatabase.logger)
            try await client.query("INSERT INTO ledger.scratch_v1 (app, user_id, n) VALUES ('app', 'carol', 1)", logger: TestDatabase.logger)
            try await client.query("SELECT ledger.projection_point_view('scratch', 'scratch_v1')", logger: TestDatabase.logger)
            let rows = try await client.query("SELECT n FROM ledger.scratch", logger: TestDatabase.logger).collect()
            #expect(try rows.map { try $0.decode(Int64.self) } == [1])
            try await client.query("SELECT ledger.projection_drop_view('scratch')", logger: TestDatabase.logger)
            try await client.query("SELECT ledger.projection_drop_table('scratch_v1')", logger: TestDatabase.logger)
        }
    }

    @Test("the server's sessions time out: statements, lock waits and idle transactions")
    func sessionsTimeOut() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let rows = try await client.query("""
                SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),
                       current_setting('idle_in_transaction_session_timeout')
                """, logger: TestDatabase.logger).collect()
            let (statement, lock, idle) = try rows[0].decode((String, String, String).self)
            #expect(statement == "1min" && lock == "30s" && idle == "1min")
        }
    }

    /// Everything recorded, as one value: positions, versions and hashes of every event and document.
    private func digest(_ client: DatabasePool) async throws -> String {
        let rows = try await client.query("""
            SELECT coalesce(string_agg(position || ':' || stream_id || ':' || stream_version || ':' || encode(hash, 'hex'), ',' ORDER BY position), '')
                || '|' || (SELECT count(*) FROM ledger.receipts) || '|' || (SELECT count(*) FROM ledger.receipt_answers)
            FROM ledger.events
            """, logger: TestDatabase.logger).collect()
        return try rows[0].decode(String.self)
    }

    @Test("keys and apps are written only through the owner's functions; a revoked key stays revoked, and its revocation is in the log")
    func keysAndAppsThroughFunctions() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let registry = AppRegistry(client: client, logger: TestDatabase.logger)
            try await registry.addApp("com.example.app", sharedSecret: nil)
            let key = try await registry.createKey(app: "com.example.app", scopes: [.read])
            try await registry.revokeKey(key.key.keyId)
            try await registry.revokeKey(key.key.keyId)
            let attempts = [
                "UPDATE ledger.api_keys SET revoked_at = NULL",
                "INSERT INTO ledger.api_keys (key_id, app, secret_hash, scopes) VALUES ('mine', 'com.example.app', sha256('x'), ARRAY['admin'])",
                "DELETE FROM ledger.api_keys",
                "TRUNCATE ledger.api_keys",
                "UPDATE ledger.apps SET shared_secret = 'x'",
                "INSERT INTO ledger.apps (bundle_id) VALUES ('com.example.evil')",
                "DELETE FROM ledger.apps",
            ]
            for statement in attempts {
                #expect(try await failure(of: statement, on: client) == "42501", "\(statement)")
            }
            // Not even the owner brings a revoked key back, or deletes one.
            try await TestDatabase.withOwnerConnection(of: client) { owner in
                for statement in ["UPDATE ledger.api_keys SET revoked_at = NULL", "DELETE FROM ledger.api_keys", "TRUNCATE ledger.api_keys"] {
                    do {
                        _ = try await owner.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger).collect()
                        Issue.record("\(statement) ran as the owner")
                    } catch let error as PSQLError {
                        #expect(error.serverInfo?[.sqlState] == "LW007", "\(statement)")
                    }
                }
            }
            #expect(try await registry.authenticate(key.token) == nil, "revoked is revoked")
            let logged = try await client.query(
                "SELECT event_type FROM ledger.events WHERE stream_id = 'keys/com.example.app' ORDER BY \"position\"", logger: TestDatabase.logger
            ).collect().map { try $0.decode(String.self) }
            #expect(logged == ["APIKeyRevoked.v1"], "revoked once, in the log: \(logged)")
            // Only the ledger's roles connect, so only they can take its advisory locks.
            let (everyone, runtime) = try await client.query("""
                SELECT has_database_privilege('public', current_database(), 'CONNECT'),
                       has_database_privilege('ledger_runtime', current_database(), 'CONNECT')
                """, logger: TestDatabase.logger).collect()[0].decode((Bool, Bool).self)
            #expect(!everyone && runtime)
            #expect(try await !LedgerDatabase.everyRoleMayConnect(client, logger: TestDatabase.logger))
        }
    }

    @Test("an append that waits past lock_timeout for a lock held elsewhere is told apart as busy: rolled back, safe to retry")
    func lockTimeoutIsBusy() async throws {
        try await TestDatabase.withDatabase(sessionSettings: ["lock_timeout": "300ms"]) { client, settings in
            try await TestDatabase.withOwnerConnection(of: client) { owner in
                _ = try await owner.query("SELECT pg_advisory_lock(7400118)", logger: TestDatabase.logger).collect()
                let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
                do {
                    _ = try await store.append([try .purchase("held-1")], to: StreamID.user(app: "app", user: "held"), expecting: .any)
                    Issue.record("the append went past a held critical section")
                } catch {
                    #expect(DatabaseOutage.isBusy(error), "\(String(reflecting: error))")
                    #expect(!DatabaseOutage.isOutage(error))
                }
                _ = try await owner.query("SELECT pg_advisory_unlock(7400118)", logger: TestDatabase.logger).collect()
            }
            #expect(try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition() == 0, "nothing recorded")
        }
    }
}
