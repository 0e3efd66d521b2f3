import Foundation
import LedgerApplication
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

/// postgres-nio 1.33.2 never answers a statement written to a connection that has just closed, so
/// the store gives up any wait on a connection once it closes (`unlessClosed`), with one
/// `closeFuture` callback per connection however many statements run on it.
@Suite("A wait on a connection is given up when the connection closes", .timeLimit(.minutes(1)))
struct ConnectionCloseWatchTests {
    @Test("a wait that would never end ends with databaseUnavailable when its connection closes; the watch forgets the connection")
    func aWaitIsGivenUpOnClose() async throws {
        try await TestDatabase.withDatabase(migrate: false) { _, settings in
            let logger = TestDatabase.logger
            let connection = try await PostgresConnection.connect(
                configuration: try settings.connectionConfiguration, id: 1, logger: logger
            )
            // Many statements over the connection's life: one callback, and no waiter left behind.
            for number in 0..<200 {
                let rows = try await connection.unlessClosed(during: "a test statement") {
                    try await connection.query("SELECT \(number)::int", logger: logger).collect()
                }
                #expect(try rows[0].decode(Int.self) == number)
            }
            #expect(ConnectionCloseWatch.shared.waiters(on: connection) == 0)

            // A wait that nothing answers, as postgres-nio's on a dropped connection.
            let (never, release) = AsyncStream.makeStream(of: Void.self)
            defer { release.finish() }
            async let closing: Void = {
                try? await Task.sleep(for: .milliseconds(200))
                try? await connection.close()
            }()
            do {
                try await connection.unlessClosed(during: "a wait that is never answered") {
                    for await _ in never {}
                }
                Issue.record("the wait ended without its connection's closing being noticed")
            } catch let error as StoreError {
                #expect(error.code == .databaseUnavailable)
                #expect(error.message == "the connection to PostgreSQL closed during a wait that is never answered")
            }
            await closing
            #expect(ConnectionCloseWatch.shared.waiters(on: connection) == nil, "a closed connection is no longer watched")

            // On a connection already closed, nothing is started.
            let started = Flag()
            await #expect(throws: StoreError.self) {
                try await connection.unlessClosed(during: "a late statement") { await started.set() }
            }
            #expect(await started.isSet == false)
        }
    }

    @Test("the pool's statements answer as postgres-nio's did: rows read, decoded, iterated; errors unchanged")
    func poolQueriesReadTheirRows() async throws {
        try await TestDatabase.withDatabase(migrate: false) { client, _ in
            let logger = TestDatabase.logger
            let rows = try await client.query("SELECT n, 'row ' || n FROM generate_series(1, 3) AS n", logger: logger)
            var seen: [String] = []
            for try await (number, text) in rows.decode((Int, String).self) { seen.append("\(number):\(text)") }
            #expect(seen == ["1:row 1", "2:row 2", "3:row 3"])
            #expect(rows.collect().count == 3)
            await #expect(throws: PSQLError.self) {
                try await client.query("SELECT 1 / 0", logger: logger)
            }
        }
    }
}

/// Set once, read by many.
private actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}
