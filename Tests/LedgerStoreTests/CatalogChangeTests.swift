import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("A catalog change rewrites only the users it changes, in bounded transactions")
struct CatalogChangeTests {
    static let app = ProjectionRunnerTests.app
    static let logger = TestDatabase.logger

    /// Twelve seeded users; the first four also bought `gems`, and the next three `rubies`, products the catalog does not know yet.
    static func seed(_ client: DatabasePool) async throws -> UserCommandHandler {
        let handler = try await ProjectionRunnerTests.seed(client, users: 12)
        for (index, product) in [(0, "gems"), (1, "gems"), (2, "gems"), (3, "gems"), (4, "rubies"), (5, "rubies"), (6, "rubies")] {
            _ = try await handler.execute(app: app, user: "u\(index)") { state, _ in
                let bought = TestTransaction("\(product)-\(index)", product, quantity: 3, purchased: Date(timeIntervalSince1970: 1_767_225_600))
                return (try TestReceipts.observe([bought], app: app, on: state).events, ())
            }
        }
        return handler
    }

    static let rubyBuyers = 3

    static func allRowsMatch(_ handler: UserCommandHandler, _ client: DatabasePool) async throws {
        for projection in Projections.all {
            let expected = try await ProjectionRunnerTests.expectedRows(projection, handler, users: 12)
            let actual = try await ProjectionRunnerTests.tableRows(projection, client)
            #expect(actual == expected, "\(projection.name): missing \(ProjectionRunnerTests.first(expected.subtracting(actual))), unexpected \(ProjectionRunnerTests.first(actual.subtracting(expected)))")
        }
    }

    @Test("a product's first definition refolds the users who bought it before, a redefinition nobody; rows equal a rebuild's")
    func firstDefinitionTouchesItsBuyersOnly() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await Self.seed(client)
            let store = PostgresEventStore(client: client, logger: Self.logger)
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          pollInterval: .milliseconds(20), logger: Self.logger)
            let folds = try #require(runner.batches.folds)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            try await Self.allRowsMatch(handler, client)

            let before = folds.counts.folds
            try await handler.defineProduct(try Product(productId: "gems", type: .consumable, prices: ["USD": "1.99"]), app: Self.app)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            #expect(folds.counts.folds - before == 4, "the four buyers of gems, and no one else, were folded again")
            try await Self.allRowsMatch(handler, client)
            let balances = try await client.query(
                "SELECT count(*) FROM ledger.consumable_balances WHERE product_id = 'gems' AND balance = 3", logger: Self.logger
            ).collect()
            #expect(try balances.first?.decode(Int.self) == 4, "the purchases made before the definition count as consumables")

            // A price change applies to facts recorded after it: no user's rows change.
            let again = folds.counts.folds
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "1.49"]), app: Self.app)
            try await handler.defineProduct(try Product(productId: "gems", type: .consumable, prices: ["USD": "2.49"]), app: Self.app)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: try await store.headPosition()))
            #expect(folds.counts.folds == again)
            try await Self.allRowsMatch(handler, client)

            // A runner that has folded nobody yet (as after a start): the buyers' streams are read
            // together, in one statement per projection that got there first, not one per buyer.
            let fresh = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                         pollInterval: .milliseconds(20), logger: Self.logger)
            let freshFolds = try #require(fresh.batches.folds)
            try await handler.defineProduct(try Product(productId: "rubies", type: .consumable, prices: ["USD": "0.99"]), app: Self.app)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(fresh, client, head: try await store.headPosition()))
            let together = freshFolds.readTogether
            #expect(together.statements >= 1 && together.streams >= Self.rubyBuyers && together.streams <= Self.rubyBuyers * together.statements,
                    "\(together)")
            #expect(freshFolds.kept.counts.eventsRead == together.events, "no buyer's stream was read on its own")
            try await Self.allRowsMatch(handler, client)
        }
    }

    @Test("a batch with more rows than one transaction may write is written in several, the checkpoint moving with the last")
    func largeBatchesAreSplit() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await Self.seed(client)
            let store = PostgresEventStore(client: client, logger: Self.logger)
            let head = try await store.headPosition()
            // Every append of the seed has ended: all of it, whatever the horizon says for a moment.
            let events = try await store.readSettled(after: 0, through: head, limit: 10_000)
            let projection = AuditTrailProjection.self
            let runner = ProjectionRunner(client: client, listenConfiguration: nil, projections: [projection], logger: Self.logger)
            try await runner.prepare()
            let writer = ProjectionBatchWriter(client: client, rowsPerTransaction: 7, logger: Self.logger)
            let rows = try await writer.rows(for: events, projection, upTo: head)
            #expect(ProjectionBatchWriter.chunks(rows, rowsPerTransaction: 7).count > 3)
            #expect(ProjectionBatchWriter.chunks(rows, rowsPerTransaction: 7).allSatisfy { chunk in
                chunk.count == 1 || chunk.reduce(0) { $0 + $1.1.count } <= 7
            })
            try await writer.write(rows, to: projection, table: projection.tableName, checkpoint: (0, head))
            #expect(try await ProjectionRunnerTests.checkpoint(projection, client).0 == head)
            // The version is building (nothing is live yet): its table, not the view.
            #expect(try await ProjectionRunnerTests.tableRows(projection, client, view: false) == (try await ProjectionRunnerTests.expectedRows(projection, handler, users: 12)))
            // A second runner's write of the same batch finds the checkpoint moved, in its first chunk.
            await #expect(throws: CheckpointMoved.self) {
                try await writer.write(rows, to: projection, table: projection.tableName, checkpoint: (0, head))
            }
        }
    }
}
