import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("A rebuild switches over beside the live runner: no checkpoint moves back, no deadlock, no reader queued behind a long query")
struct ProjectionSwitchTests {
    static let logger = TestDatabase.logger
    static let projection = ConsumableBalancesProjection.self

    /// One more consumable purchase for a seeded user.
    static func buy(_ handler: UserCommandHandler, user: Int, _ transaction: String) async throws {
        _ = try await handler.execute(app: ProjectionRunnerTests.app, user: "u\(user)") { state, _ in
            let decision = try TestReceipts.observe(
                [TestTransaction(transaction, "coins", quantity: 2, purchased: Date(timeIntervalSince1970: 1_767_225_600))],
                app: ProjectionRunnerTests.app, on: state
            )
            return (decision.events, ())
        }
    }

    static func runner(_ client: DatabasePool, _ settings: DatabaseSettings, batchSize: Int = 50) throws -> ProjectionRunner {
        ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, projections: [projection],
                         batchSize: batchSize, pollInterval: .milliseconds(20), logger: logger)
    }

    static func head(_ client: DatabasePool) async throws -> Int64 {
        try await PostgresEventStore(client: client, logger: logger).headPosition()
    }

    @Test("a checkpoint never moves back: the database refuses it, and a switch brings the rebuilt rows up to a runner that moved on")
    func checkpointsOnlyMoveForward() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 6)
            let runner = try Self.runner(client, settings)
            let before = try await Self.head(client)
            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                try await ProjectionRunnerTests.checkpoint(Self.projection, client) == (before, "live", nil)
            })

            let lowered = await #expect(throws: PSQLError.self) {
                try await client.query(
                    "UPDATE ledger.projections SET position = position - 1 WHERE name = \(Self.projection.name)", logger: Self.logger
                )
            }
            #expect(lowered?.serverInfo?[.sqlState] == "LW010")

            // The rebuild has built and caught up to the head; then the live runner applies more.
            let rebuilder = ProjectionRebuilder(client: client, logger: Self.logger)
            let table = "\(Self.projection.tableName)_rebuild"
            let (built, _) = try await rebuilder.build(Self.projection, into: table) { _ in }
            let caughtUp = try await rebuilder.catchUp(Self.projection, table: table, from: built)
            #expect(caughtUp == before)
            try await Self.buy(handler, user: 1, "late-1")
            try await Self.buy(handler, user: 2, "late-2")
            let after = try await Self.head(client)
            try await runner.catchUpLive(Self.projection, from: before, to: after)
            #expect(try await ProjectionRunnerTests.checkpoint(Self.projection, client).0 == after)

            // The followers' horizon held back, as a transaction ending in another database between
            // the horizon's snapshot and its look at pg_stat_activity holds it for a read: the
            // events up to the live checkpoint are settled, and the switch still reads them.
            try await TestDatabase.withOwnerConnection(of: client) { owner in
                try await owner.query(
                    "CREATE OR REPLACE FUNCTION ledger.follow_horizon() RETURNS xid8 LANGUAGE sql STABLE AS $$ SELECT '1'::xid8 $$",
                    logger: Self.logger
                )
            }
            #expect(try await PostgresEventStore(client: client, logger: Self.logger).readAll(after: before).isEmpty)

            // Switching at the rebuild's position would move the checkpoint back to `before`, and a
            // read answered at `after` would be followed by one answered at `before`.
            let switched = try await rebuilder.switchOver(Self.projection, rebuilt: table, at: caughtUp)
            #expect(switched == after)
            #expect(try await ProjectionRunnerTests.checkpoint(Self.projection, client) == (after, "live", nil))
            let expected = try await ProjectionRunnerTests.expectedRows(Self.projection, handler, users: 6)
            #expect(try await ProjectionRunnerTests.tableRows(Self.projection, client) == expected, "the late purchases are in the rebuilt rows")
        }
    }

    @Test("while a long query holds the view, the switch waits and readers arriving meanwhile are answered")
    func readersAreNotQueuedBehindTheSwitch() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 6)
            let head = try await Self.head(client)
            #expect(try await ProjectionRunnerTests.runUntil(Self.runner(client, settings)) {
                try await ProjectionRunnerTests.checkpoint(Self.projection, client) == (head, "live", nil)
            })
            let view = "ledger.\(Self.projection.name.rawValue)"
            try await TestDatabase.withConnection(settings) { long in
                // A report that reads the view in a transaction it keeps open.
                try await long.query("BEGIN", logger: Self.logger)
                try await long.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(view)"), logger: Self.logger)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        _ = try await ProjectionRebuilder(client: client, logger: Self.logger).rebuild(Self.projection, dryRun: false)
                    }
                    // The switch is trying to take the view: a session of this database waits for a
                    // lock (of any kind: a relation's, or a transaction's, which names no database).
                    // Each of its tries waits 100 ms, then pauses up to a second; the bound is generous
                    // (the switch's patience is 300 s), since a loaded CI machine once took over 60 s to
                    // get there.
                    #expect(try await eventually(timeout: .seconds(240)) {
                        let rows = try await client.query(
                            """
                            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                            WHERE NOT l.granted AND a.datname = current_database()
                            """,
                            logger: Self.logger
                        ).collect()
                        return try rows.first?.decode(Int64.self) ?? 0 > 0
                    })
                    // Readers arriving meanwhile are answered: each would otherwise queue behind the
                    // switch's exclusive lock, itself queued behind the long query, until it ends.
                    var refused: (any Error)?
                    do {
                        try await TestDatabase.withConnection(settings) { reader in
                            try await reader.query("SET lock_timeout = '3s'", logger: Self.logger)
                            for _ in 0..<10 {
                                let rows = try await reader.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(view)"), logger: Self.logger).collect()
                                #expect(try rows.first?.decode(Int64.self) ?? 0 > 0)
                                try await Task.sleep(for: .milliseconds(100))
                            }
                        }
                    } catch {
                        refused = error
                    }
                    #expect(refused == nil, "a reader waited 3 s for the view: \(String(reflecting: refused))")
                    let pending = try await client.query(
                        PostgresQuery(unsafeSQL: "SELECT to_regclass('ledger.\(Self.projection.tableName)_rebuild') IS NOT NULL"), logger: Self.logger
                    ).collect()
                    #expect(try pending.first?.decode(Bool.self) == true, "nothing switched while the long query ran")
                    try await long.query("COMMIT", logger: Self.logger)
                    try await group.waitForAll()
                }
            }
            #expect(try await ProjectionRunnerTests.checkpoint(Self.projection, client) == (head, "live", nil))
            let expected = try await ProjectionRunnerTests.expectedRows(Self.projection, handler, users: 6)
            #expect(try await ProjectionRunnerTests.tableRows(Self.projection, client) == expected)
        }
    }

    @Test("rebuilds switching over while the runner applies new purchases never deadlock or move the checkpoint back, and end with the folds' rows")
    func rebuildsBesideABusyRunner() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 8)
            let runner = try Self.runner(client, settings, batchSize: 1)
            let samples = try await withThrowingTaskGroup(of: [Int64].self) { group in
                group.addTask {
                    try? await runner.run()
                    return []
                }
                group.addTask {
                    var seen: [Int64] = []
                    while !Task.isCancelled {
                        if let (position, _, _) = try? await ProjectionRunnerTests.checkpoint(Self.projection, client) { seen.append(position) }
                        try? await Task.sleep(for: .milliseconds(5))
                    }
                    return seen
                }
                async let purchases: Void = {
                    for index in 0..<24 { try await Self.buy(handler, user: index % 8, "busy-\(index)") }
                }()
                let rebuilder = ProjectionRebuilder(client: client, logger: Self.logger)
                for _ in 0..<4 {
                    _ = try await rebuilder.rebuild(Self.projection, dryRun: false)
                }
                try await purchases
                let head = try await Self.head(client)
                #expect(try await eventually(timeout: .seconds(120)) {
                    try await ProjectionRunnerTests.checkpoint(Self.projection, client) == (head, "live", nil)
                })
                group.cancelAll()
                var samples: [Int64] = []
                for try await part in group { samples += part }
                return samples
            }
            #expect(samples.count > 10)
            #expect(zip(samples, samples.dropFirst()).allSatisfy { $0 <= $1 }, "the checkpoint moved back: \(samples)")
            let expected = try await ProjectionRunnerTests.expectedRows(Self.projection, handler, users: 8)
            #expect(try await ProjectionRunnerTests.tableRows(Self.projection, client) == expected)
        }
    }
}
