import Foundation
import LedgerApplication
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

/// postgres-nio 1.33.2 never answers a statement written to a connection that has just closed, so
/// the store gives up any wait on a connection once it closes (`unlessClosed`), with one
/// `closeFuture` callback per connection however many statements run on it.
@Suite("A wait on a connection is given up when the connection closes", .timeLimit(.minutes(3)))
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

extension ConnectionCloseWatchTests {
    /// A result several megabytes long, its session ended by PostgreSQL (as a crash or restart
    /// would) while the rows stream in: the statement fails as an outage. Read through postgres-nio's
    /// row sequence, a close while it held a read for its consumer stopped the whole process.
    @Test("a connection PostgreSQL ends while a long result streams in fails the statement as an outage, and nothing else")
    func aSessionEndedMidResultIsAnOutage() async throws {
        try await TestDatabase.withDatabase(migrate: false) { client, _ in
            let logger = TestDatabase.logger
            var ended = 0
            for round in 0..<10 {
                let tag = "stream-\(round)-\(UInt32.random(in: 0...UInt32.max))"
                async let read: Result<Int, any Error> = {
                    do {
                        let rows = try await client.query(
                            "SELECT \(tag)::text, repeat('x', 2000) FROM generate_series(1, 20000)", logger: logger
                        )
                        return .success(rows.collect().count)
                    } catch {
                        return .failure(error)
                    }
                }()
                // End the session that runs the statement once it is running (the server's role
                // may end its own sessions), from another of the pool's connections.
                let deadline = ContinuousClock.now + .seconds(5)
                while ContinuousClock.now < deadline {
                    // The pool may lend a connection an earlier round ended: an outage, tried again.
                    let ended = (try? await client.query(
                        """
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE query LIKE 'SELECT $1::text, repeat%' AND state = 'active' AND pid <> pg_backend_pid()
                          AND datname = current_database()
                        """,
                        logger: logger
                    ).collect()) ?? []
                    if !ended.isEmpty { break }
                    try await Task.sleep(for: .milliseconds(5))
                }
                switch await read {
                case .success(let count):
                    // The statement finished before it could be ended: every row arrived.
                    #expect(count == 20000)
                case .failure(let error):
                    ended += 1
                    #expect(DatabaseOutage.isOutage(error), "\(String(reflecting: error))")
                }
            }
            #expect(ended > 0, "no statement was ended mid-way in 10 rounds")
            // The pool goes on lending connections that work.
            #expect(try await eventually(timeout: .seconds(10)) { (try? await client.query("SELECT 1", logger: logger))?.collect().count == 1 })
        }
    }
}

/// Set once, read by many.
private actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}
