import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

@Suite("A projection stops on errors that would repeat, retries within seconds on those that pass, and is read only once live")
struct ProjectionRunnerFailureTests {
    static let logger = TestDatabase.logger

    /// Runs one projection's task until it ends by itself (true) or `timeout` passes (false).
    static func endsByItself(_ runner: ProjectionRunner, _ projection: any UserProjection.Type, timeout: Duration = .seconds(120)) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { await runner.runProjection(projection); return true }
            group.addTask { try await Task.sleep(for: timeout); return false }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    @Test("rows the database refuses stop the projection at that event, with the error and the position, and no retry; a restart tries again")
    func refusedRowsStopTheProjection() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 6)
            let projection = ConsumableBalancesProjection.self
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, projections: [projection],
                                          batchSize: 1, pollInterval: .milliseconds(50), logger: Self.logger)
            try await runner.prepare()
            // Rows one user's events produce break a rule of the table, as a projection's bug would.
            try await TestDatabase.withOwnerConnection(of: client) {
                try await $0.query("ALTER TABLE ledger.\(unescaped: projection.tableName) ADD CONSTRAINT refuse_u3 CHECK (user_id <> 'u3')", logger: Self.logger)
            }
            #expect(try await Self.endsByItself(runner, projection), "the runner kept retrying a batch that fails the same way each time")

            let (position, status, error) = try await ProjectionRunnerTests.checkpoint(projection, client)
            #expect(status == "failed")
            let stored = try await client.query(
                """
                SELECT p.error_position, e.stream_id FROM ledger.projections p JOIN ledger.events e ON e.position = p.error_position
                WHERE p.name = \(projection.name)
                """,
                logger: Self.logger
            ).collect()
            let (errorPosition, stream) = try #require(try stored.first?.decode((Int64, String).self))
            #expect(stream == "user/\(ProjectionRunnerTests.app)/u3", "it stopped at one of u3's events")
            #expect(position == errorPosition - 1, "everything before it applied, it not")
            #expect(error?.contains("at position \(errorPosition)") == true, "\(error ?? "")")
            #expect(error?.contains("refuse_u3") == true && error?.contains("SQLSTATE 23514") == true, "\(error ?? "")")

            // Readers are told, and not answered from the stopped table.
            let reads = UserReadModels(client: client, logger: Self.logger)
            let refusal = await #expect(throws: ReadError.self) { try await reads.checkpoint(of: [.consumableBalances]) }
            #expect(refusal?.code == .projectionsBehind)
            #expect(refusal?.message.contains("consumable_balances (at position \(errorPosition)) stopped on an error") == true,
                    "\(refusal?.message ?? "")")

            // The cause removed, a restart tries the version again: it catches up and is live.
            try await TestDatabase.withOwnerConnection(of: client) {
                try await $0.query("ALTER TABLE ledger.\(unescaped: projection.tableName) DROP CONSTRAINT refuse_u3", logger: Self.logger)
            }
            let head = try await PostgresEventStore(client: client, logger: Self.logger).headPosition()
            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                try await ProjectionRunnerTests.checkpoint(projection, client) == (head, "live", nil)
            })
            let expected = try await ProjectionRunnerTests.expectedRows(projection, handler, users: 6)
            #expect(try await ProjectionRunnerTests.tableRows(projection, client) == expected)
            #expect(try await reads.checkpoint(of: [.consumableBalances]) == head)
        }
    }

    @Test("a lock the runner cannot get in time is retried, never recorded as a failure; once free, the runner catches up")
    func lockTimeoutsAreRetried() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 4)
            let projection = OwnershipProjection.self
            let make = { @Sendable (client: DatabasePool) in
                ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, projections: [projection],
                                 batchSize: 5, pollInterval: .milliseconds(50), logger: Self.logger)
            }
            let head = try await PostgresEventStore(client: client, logger: Self.logger).headPosition()
            #expect(try await ProjectionRunnerTests.runUntil(make(client)) {
                try await ProjectionRunnerTests.checkpoint(projection, client) == (head, "live", nil)
            })
            _ = try await handler.execute(app: ProjectionRunnerTests.app, user: "u1") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
            }
            let newHead = try await PostgresEventStore(client: client, logger: Self.logger).headPosition()
            // Sessions of the runner's own client give up a lock wait after 100 ms (55P03).
            var impatient = settings
            impatient.sessionSettings["lock_timeout"] = "100ms"
            let (states, final) = try await LedgerDatabase.withClient(impatient, logger: Self.logger) { runnerClient in
                try await TestDatabase.withConnection(settings) { holder in
                    // Another session holds the projection's row, which every batch locks first.
                    try await holder.query("BEGIN", logger: Self.logger)
                    try await holder.query(
                        "SELECT 1 FROM ledger.projections WHERE name = \(projection.name) FOR UPDATE", logger: Self.logger
                    )
                    return try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await make(runnerClient).run() }
                        var states: Set<String> = []
                        for _ in 0..<20 {
                            states.insert(try await ProjectionRunnerTests.checkpoint(projection, client).1)
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        try await holder.query("COMMIT", logger: Self.logger)
                        let caughtUp = try await eventually {
                            try await ProjectionRunnerTests.checkpoint(projection, client).0 == newHead
                        }
                        let final = try await ProjectionRunnerTests.checkpoint(projection, client)
                        states.insert(final.1)
                        group.cancelAll()
                        return (states, caughtUp ? final : nil)
                    }
                }
            }
            #expect(states == ["live"], "states seen while the lock was held: \(states)")
            #expect(final.map { $0 == (newHead, "live", nil) } == true)
        }
    }

    @Test("after a transient error the runner waits 0.25 s, doubling to at most 2 s, so a database that returns is followed within seconds")
    func retryDelays() {
        #expect(ProjectionRunner.retryDelays(6) == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
    }

    @Test("a version registered on a log with history is building, and reads are refused, until it has caught up")
    func buildingUntilCaughtUp() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await ProjectionRunnerTests.seed(client, users: 4)
            let head = try await PostgresEventStore(client: client, logger: Self.logger).headPosition()
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          batchSize: 5, pollInterval: .milliseconds(50), logger: Self.logger)
            try await runner.prepare()
            for projection in Projections.all {
                #expect(try await ProjectionRunnerTests.checkpoint(projection, client) == (0, "building", nil), "\(projection.name)")
            }
            let reads = UserReadModels(client: client, logger: Self.logger)
            let refusal = await #expect(throws: ReadError.self) { try await reads.checkpoint(of: [.ownership, .consumableBalances]) }
            #expect(refusal?.code == .projectionsBehind)
            #expect(refusal?.message.contains("ownership (at position 0), consumable_balances (at position 0) are still being built") == true,
                    "\(refusal?.message ?? "")")
            await #expect(throws: ReadError.self) {
                try await reads.waitForProjections([.ownership], toReach: 1, timeout: .milliseconds(200))
            }

            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                for projection in Projections.all where try await ProjectionRunnerTests.checkpoint(projection, client) != (head, "live", nil) {
                    return false
                }
                return true
            })
            #expect(try await reads.checkpoint(of: [.ownership]) == head)
        }
    }

    @Test("on a new database the first versions are live at once, so reads are answered from the first request")
    func liveOnAnEmptyLog() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: Self.logger)
            try await runner.prepare()
            for projection in Projections.all {
                #expect(try await ProjectionRunnerTests.checkpoint(projection, client) == (0, "live", nil), "\(projection.name)")
            }
            let reads = UserReadModels(client: client, logger: Self.logger)
            #expect(try await reads.checkpoint(of: [.ownership, .subscriptionPeriods, .consumableBalances]) == 0)
        }
    }
}
