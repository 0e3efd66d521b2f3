import LedgerTesting
import Foundation
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import PostgresNIO
import Testing

/// Collects what a follower delivered.
actor Delivered {
    private(set) var positions: [Int64] = []
    func add(_ events: [RecordedEvent]) { positions += events.map(\.position) }
}

@Suite("Following the log never skips and never repeats")
struct LogFollowerTests {
    /// Runs a follower from the start of the log while `body` runs, and returns what it delivered
    /// once `expected` positions have arrived (or the bound passes).
    private func following(
        _ client: DatabasePool,
        _ settings: DatabaseSettings,
        expecting expected: @escaping @Sendable () async -> Int,
        _ body: @Sendable (PostgresEventStore) async throws -> Void
    ) async throws -> [Int64] {
        let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
        let follower = LogFollower(
            store: store, listenConfiguration: try settings.connectionConfiguration,
            pollInterval: .milliseconds(200), batchSize: 50, logger: TestDatabase.logger
        )
        let delivered = Delivered()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await follower.follow(after: 0) { events in await delivered.add(events) }
            }
            try await body(store)
            let target = await expected()
            _ = try await eventually { await delivered.positions.count >= target }
            // A little longer, so that a repeated delivery would show.
            try await Task.sleep(for: .milliseconds(500))
            group.cancelAll()
            return await delivered.positions
        }
    }

    @Test("32 writers on distinct and shared streams: the follower sees every event once, in position order")
    func concurrentWriters() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let appended = AppendedPositions()
            let delivered = try await following(client, settings, expecting: { await appended.all.count }) { store in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<32 {
                        group.addTask {
                            for round in 0..<25 {
                                // Even writers own a stream; odd writers share four streams.
                                let stream = writer % 2 == 0 ? "user/app/own-\(writer)" : "user/app/shared-\(writer % 4)"
                                let batch = (0..<(1 + round % 3)).map { _ in UUID().uuidString }
                                let result = try await store.append(
                                    try batch.map { try .purchase($0) }, to: StreamID(stream), expecting: .any
                                )
                                for case .appended(let position, _) in result.outcomes { await appended.add(position) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let expected = await appended.all
            let eventsPerWriter = (0..<25).map { 1 + $0 % 3 }.reduce(0, +)
            #expect(expected.count == 32 * eventsPerWriter)
            #expect(delivered.count == expected.count, "every appended event delivered exactly once")
            #expect(Set(delivered) == Set(expected))
            #expect(delivered == delivered.sorted(), "in position order")
            #expect(Set(delivered).count == delivered.count, "no repeats")
        }
    }

    @Test("a transaction held open is not skipped: later commits wait for it, then both arrive in order")
    func heldOpenTransaction() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            try await TestDatabase.withConnection(settings) { slow in
                // The slow writer takes the earlier position and does not commit yet.
                let slowPosition = try await TestDatabase.beginAppend(on: slow, stream: "user/app/slow", data: #"{"slow":true}"#)

                let fast = try await store.append([try .purchase("fast")], to: StreamID("user/app/fast"), expecting: .any)
                #expect(fast.position > slowPosition)

                // The fast event is committed, but a reader must not pass the open transaction.
                let visibleWhileOpen = try await store.readAll(after: 0, stream: nil, limit: 100)
                #expect(!visibleWhileOpen.map(\.position).contains(fast.position))

                let delivered = Delivered()
                let follower = LogFollower(
                    store: store, listenConfiguration: try settings.connectionConfiguration,
                    pollInterval: .milliseconds(100), logger: TestDatabase.logger
                )
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await follower.follow(after: 0) { await delivered.add($0) } }
                    try await Task.sleep(for: .milliseconds(400))
                    #expect(await delivered.positions.isEmpty, "nothing is delivered past an open transaction")

                    try await slow.query("COMMIT", logger: TestDatabase.logger)
                    #expect(try await eventually { await delivered.positions.count == 2 })
                    #expect(await delivered.positions == [slowPosition, fast.position])
                    group.cancelAll()
                }
            }
        }
    }

    @Test("a transaction held open in another database of the server does not hold this ledger's followers back")
    func otherDatabaseTransaction() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            // Another database's transaction that holds a transaction id, as a DROP DATABASE waiting
            // for a checkpoint does: before the per-database horizon it stalled every follower.
            try await TestDatabase.withConnection(settings.with(database: "postgres")) { elsewhere in
                try await elsewhere.query("BEGIN", logger: TestDatabase.logger)
                try await elsewhere.query("SELECT pg_current_xact_id()", logger: TestDatabase.logger)
                let appended = try await store.append([try .purchase("while-elsewhere-open")], to: StreamID("user/app/h"), expecting: .any)
                // (`eventually`: another test's transaction that ended between the snapshot and the
                // look at pg_stat_activity cannot be placed, and holds the horizon for that one read.)
                #expect(try await eventually(timeout: .seconds(5)) {
                    try await store.readAll(after: 0, stream: nil, limit: 100).map(\.position) == [appended.position]
                })

                // The same, held open in this database, still holds the horizon: it might append.
                try await TestDatabase.withConnection(settings) { here in
                    try await here.query("BEGIN", logger: TestDatabase.logger)
                    try await here.query("SELECT pg_current_xact_id()", logger: TestDatabase.logger)
                    let later = try await store.append([try .purchase("while-here-open")], to: StreamID("user/app/h"), expecting: .any)
                    let whileOpen = try await store.readAll(after: 0, stream: nil, limit: 100).map(\.position)
                    #expect(!whileOpen.contains(later.position))
                    try await here.query("ROLLBACK", logger: TestDatabase.logger)
                    #expect(try await eventually(timeout: .seconds(5)) {
                        try await store.readAll(after: 0, stream: nil, limit: 100).map(\.position) == [appended.position, later.position]
                    })
                }
                try await elsewhere.query("ROLLBACK", logger: TestDatabase.logger)
            }
        }
    }

    @Test("a rolled-back append leaves a hole that never stalls followers")
    func rolledBackHole() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let before = try await store.append([try .purchase("before")], to: StreamID("user/app/a"), expecting: .any)
            try await TestDatabase.withConnection(settings) { connection in
                try await TestDatabase.beginAppend(on: connection, stream: "user/app/rolled-back")
                try await connection.query("ROLLBACK", logger: TestDatabase.logger)
            }
            let after = try await store.append([try .purchase("after")], to: StreamID("user/app/a"), expecting: .any)
            #expect(after.position > before.position + 1, "the rolled-back append used a position")

            let delivered = try await following(client, settings, expecting: { 2 }) { _ in }
            #expect(delivered == [before.position, after.position])
        }
    }

    @Test("reading after a checkpoint resumes exactly where it left off")
    func resumeFromCheckpoint() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            var positions: [Int64] = []
            for index in 0..<10 {
                positions.append(try await store.append([try .purchase("\(index)")], to: StreamID("user/app/r"), expecting: .any).position)
            }
            // Transaction ids are cluster-wide: a transaction open in another database (another
            // test) may hold the horizon back for a moment. It delays, it never skips.
            // The horizon can also step back for a moment (a transaction elsewhere whose snapshot is
            // older than the appends takes an id): a page read then is short, and the next read, from
            // the same checkpoint, brings the rest. The pages joined must be exactly the appends.
            let appended = positions
            #expect(try await eventually {
                let firstPage = try await store.readAll(after: 0, stream: nil, limit: 4)
                guard firstPage.count == 4, let checkpoint = firstPage.last?.position else { return false }
                let rest = try await store.readAll(after: checkpoint, stream: nil, limit: 100)
                return (firstPage + rest).map(\.position) == appended
            })
            #expect(try await eventually {
                try await store.readAll(after: 0, stream: StreamID("user/app/r"), limit: 100).map(\.position) == appended
            })
            #expect(try await store.readAll(after: 0, stream: StreamID("user/app/none"), limit: 100).isEmpty)
        }
    }
}

actor AppendedPositions {
    private(set) var all: [Int64] = []
    func add(_ position: Int64) { all.append(position) }
}
