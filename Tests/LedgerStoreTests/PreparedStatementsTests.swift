import Foundation
import LedgerApplication
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

@Suite("Statements prepared once per connection take any text safely and survive a change of what they read")
struct PreparedStatementsTests {
    static let logger = TestDatabase.logger

    @Test("arguments with quotes, backslashes and non-ASCII come back as they went in; U+0000 is refused")
    func literalsRoundTrip() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let echo = PreparedStatements.Statement(name: "ledger_test_echo", sql: "SELECT $1 || '|' || $2", arguments: 2)
            for value in ["plain", "it's", "back\\slash\\", "\\'; DROP TABLE ledger.events; --", "ünïcødé ✓", "", "E'x'", "$$", "\n\t"] {
                let rows = try await client.query(prepared: echo, [value, "tail"], logger: Self.logger)
                #expect(try rows.collect().first?.decode(String.self) == value + "|tail")
            }
            await #expect(throws: StoreError.self) { try await client.query(prepared: echo, ["a\u{0}b", "x"], logger: Self.logger) }
            #expect(try await client.query("SELECT count(*) FROM ledger.events", logger: Self.logger).collect().first?.decode(Int.self) == 0)
        }
    }

    @Test("a statement whose table changed its columns is prepared again; a closed connection's statements are forgotten")
    func preparedAgain() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await TestDatabase.withConnection(settings) { connection in
                let statements = PreparedStatements()
                try await TestDatabase.withOwnerConnection(of: client) { owner in
                    try await owner.query("CREATE TABLE ledger.test_prepared (a text)", logger: Self.logger)
                    try await owner.query("INSERT INTO ledger.test_prepared VALUES ('one')", logger: Self.logger)
                    try await owner.query("GRANT SELECT ON ledger.test_prepared TO ledger_runtime", logger: Self.logger)
                }
                let read = PreparedStatements.Statement(name: "ledger_test_read", sql: "SELECT * FROM ledger.test_prepared WHERE a <> $1", arguments: 1)
                #expect(try await statements.execute(read, ["x"], on: connection, logger: Self.logger).count == 1)
                #expect(statements.count == 1)
                try await TestDatabase.withOwnerConnection(of: client) { owner in
                    try await owner.query("ALTER TABLE ledger.test_prepared ADD COLUMN b int DEFAULT 7", logger: Self.logger)
                }
                // PostgreSQL refuses the old plan ("cached plan must not change result type"): prepared again.
                let rows = try await statements.execute(read, ["x"], on: connection, logger: Self.logger)
                let decoded = try rows.first?.decode((String, Int).self)
                #expect(rows.count == 1 && decoded?.0 == "one" && decoded?.1 == 7)
                try await connection.close()
                #expect(try await eventually(timeout: .seconds(5)) { statements.count == 0 })
            }
        }
    }
}
