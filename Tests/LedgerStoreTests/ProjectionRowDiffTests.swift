import Foundation
import LedgerApplication
import LedgerDomain
import LedgerDomainTesting
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("A batch writes only the rows it adds to a user, not all of the user's rows again")
struct ProjectionRowDiffTests {
    static let app = ProjectionRunnerTests.app
    static let logger = TestDatabase.logger

    @Test("rows gained, as multisets: appended, interleaved, the same, or some lost (then nil: replace them all)")
    func addedRows() {
        let a: [String?] = ["a", nil], b: [String?] = ["b", "1"], c: [String?] = ["c", "2"]
        #expect(ProjectionBatchWriter.added(to: [a, b], giving: [a, b]) == [])
        #expect(ProjectionBatchWriter.added(to: [a, b], giving: [a, b, c]) == [c])
        #expect(ProjectionBatchWriter.added(to: [a, b], giving: [c, b, a, a]) == [c, a])
        #expect(ProjectionBatchWriter.added(to: [a, a, b], giving: [a, b, c]) == nil, "one of the two a's went")
        #expect(ProjectionBatchWriter.added(to: [a, b], giving: [a, c]) == nil, "b changed into c")
        #expect(ProjectionBatchWriter.added(to: [], giving: [b]) == [b])
    }

    /// Every projection's table holds exactly the rows the pure projection gives, each once.
    static func tablesHoldExactly(_ handler: UserCommandHandler, _ client: DatabasePool, users: Int) async throws {
        let catalog = try await handler.reader.catalog(app: app)
        for projection in Projections.all {
            var expected = 0
            for index in 0..<users {
                let state = try await handler.reader.state(app: app, user: "u\(index)")
                expected += projection.columnValues(app: app, user: "u\(index)", state: state, catalog: catalog).count
            }
            let counted = try await client.query(
                PostgresQuery(unsafeSQL: "SELECT count(*) FROM ledger.\(projection.name.rawValue)"), logger: logger
            ).collect().first?.decode(Int.self)
            #expect(counted == expected, "\(projection.name): \(counted ?? -1) rows for \(expected), so some are there twice or missing")
            #expect(try await ProjectionRunnerTests.tableRows(projection, client) == ProjectionRunnerTests.expectedRows(projection, handler, users: users))
        }
    }

    @Test("one purchase more writes that purchase's rows only; a refund replaces the user's changed rows; tables equal a rebuild")
    func batchesWriteWhatTheyAdd() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let users = 6
            let handler = try await ProjectionRunnerTests.seed(client, users: users)
            let store = PostgresEventStore(client: client, logger: Self.logger)
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          pollInterval: .milliseconds(20), logger: Self.logger)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            try await Self.tablesHoldExactly(handler, client, users: users)

            // A long history for u0: many purchases, each its own batch, with the runner leading
            // all along (starting to lead forgets what it wrote: another server may have written).
            var rowsPerPurchase: [Int] = []
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await runner.run() }
                for round in 0..<12 {
                    let before = runner.writes.current.rows
                    _ = try await handler.execute(app: Self.app, user: "u0") { state, _ in
                        let coins = TestTransaction("0-more-\(round)", "coins", quantity: 1, purchased: Date(timeIntervalSince1970: 1_767_225_600 + Double(round) * 60))
                        return (try TestReceipts.observe([coins], app: Self.app, on: state).events, ())
                    }
                    let head = try await store.headPosition()
                    #expect(try await eventually(timeout: .seconds(60)) {
                        for projection in Projections.all where try await ProjectionRunnerTests.checkpoint(projection, client).0 < head { return false }
                        return true
                    })
                    rowsPerPurchase.append(runner.writes.current.rows - before)
                }
                group.cancelAll()
            }
            // The same rows each time, however many purchases came before: what the purchase added
            // (its audit rows, its delivery), and the rows it changed (the balance, replaced whole).
            #expect(Set(rowsPerPurchase.dropFirst()).count == 1, "rows written per purchase: \(rowsPerPurchase)")
            let audit = try await client.query("SELECT count(*) FROM ledger.audit_trail WHERE user_id = 'u0'", logger: Self.logger)
                .collect().first?.decode(Int.self) ?? 0
            #expect((rowsPerPurchase.last ?? .max) * 3 < audit, "a batch rewrote u0's \(audit) audit rows: \(rowsPerPurchase)")
            try await Self.tablesHoldExactly(handler, client, users: users)

            // A refund changes rows written before: those users' rows are replaced, not added to.
            _ = try await handler.execute(app: Self.app, user: "u0") { state, _ in
                (try UserDecisions.revoke(transactionId: "0-more-3", revokedAt: Date(timeIntervalSince1970: 1_767_300_000), reason: "refund", on: state), ())
            }
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            try await Self.tablesHoldExactly(handler, client, users: users)

            // Another runner (a server that led meanwhile) writes; this one starts leading again.
            let other = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                         pollInterval: .milliseconds(20), logger: Self.logger)
            _ = try await handler.execute(app: Self.app, user: "u1") { state, _ in
                let coins = TestTransaction("1-more", "coins", quantity: 2, purchased: Date(timeIntervalSince1970: 1_767_225_600))
                return (try TestReceipts.observe([coins], app: Self.app, on: state).events, ())
            }
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(other, client, head: try await store.headPosition()))
            _ = try await handler.execute(app: Self.app, user: "u1") { state, _ in
                let coins = TestTransaction("1-more-again", "coins", quantity: 2, purchased: Date(timeIntervalSince1970: 1_767_225_660))
                return (try TestReceipts.observe([coins], app: Self.app, on: state).events, ())
            }
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            try await Self.tablesHoldExactly(handler, client, users: users)
        }
    }
}
