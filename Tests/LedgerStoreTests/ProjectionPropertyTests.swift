import Foundation
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("Incremental projections equal a rebuild, whatever the batches and the stops")
struct ProjectionPropertyTests {
    @Test("random histories, random batch sizes, stopped and resumed, the last batch run twice: no difference from a rebuild", arguments: [7, 19, 31])
    func incrementalEqualsRebuild(seed: Int) async throws {
        try await TestDatabase.withDatabase("property\(seed)") { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let seeder = HistorySeeder(ledger: PostgresLedger(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
            _ = try await seeder.run(.init(apps: 2, users: 6, events: 300, concurrency: 3, seed: UInt64(seed)))
            // Each append to a user's stream is one command; a command that found nothing new (a
            // duplicate post) appended nothing, so the seeder counts at least as many.
            let appends = try #require(try await client.query(
                "SELECT count(DISTINCT transaction_id) FROM ledger.events WHERE starts_with(stream_id, 'user/')", logger: TestDatabase.logger
            ).collect().first).decode(Int.self)
            #expect(appends > 0 && seeder.commands >= appends, "\(seeder.commands) commands, \(appends) appends")
            // The history holds Apple's shapes, not only plain purchases.
            let shapes = try await client.query(
                """
                SELECT count(*) FILTER (WHERE data::text LIKE '%FAMILY_SHARED%'), count(*) FILTER (WHERE data::text LIKE '%"is_upgraded": "true"%'),
                       count(*) FILTER (WHERE data::text LIKE '%"is_trial_period": "true"%'), count(*) FILTER (WHERE data::text LIKE '%origin-%'),
                       count(*) FILTER (WHERE data::text LIKE '%cancellation_reason%'),
                       count(*) FILTER (WHERE data::text LIKE '%REFUND_PRORATED%' AND data::text LIKE '%"quantity": "3"%'),
                       count(*) FILTER (WHERE data::text LIKE '%REFUND_PRORATED%' AND data::text LIKE '%expiresDate%')
                FROM ledger.events WHERE event_type = 'AppStoreTransactionObserved.v1'
                """, logger: TestDatabase.logger
            ).collect()
            let counts = try #require(shapes.first).decode((Int, Int, Int, Int, Int, Int, Int).self)
            #expect([counts.0, counts.1, counts.2, counts.3, counts.4, counts.5, counts.6].filter { $0 > 0 }.count == 7, "\(counts)")
            let euros = try #require(try await client.query(
                "SELECT count(*)::int FROM ledger.events WHERE event_type LIKE 'ReceiptPosted%' AND data ->> 'currency' = 'EUR'", logger: TestDatabase.logger
            ).collect().first).decode(Int.self)
            #expect(euros > 0, "the users' currency changes over time")
            var random = SplitMix(seed: UInt64(seed))
            let head = try await store.headPosition()
            // Several runners in a row, each with its own batch size, each stopped early.
            for _ in 0..<3 {
                let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                              batchSize: 1 + Int(random.next() % 40), pollInterval: .milliseconds(50),
                                              logger: TestDatabase.logger)
                let stopAt = Int64(random.next() % UInt64(head))
                _ = try await ProjectionRunnerTests.runUntil(runner) {
                    try await ProjectionRunnerTests.checkpoint(OwnershipProjection.self, client).0 >= stopAt
                }
            }
            // Then to the end.
            let last = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                        batchSize: 50, pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(last, client, head: head))
            // Re-running the last batch (as after a crash between the work and the reply) changes nothing.
            let batches = ProjectionBatchWriter(client: client, logger: TestDatabase.logger)
            let lastBatch = try await store.readSettled(after: max(0, head - 25), through: head, limit: 25)
            for projection in Projections.all {
                try await batches.applyRows(lastBatch, to: projection, table: projection.tableName)
            }
            let rebuilder = ProjectionRebuilder(client: client, logger: TestDatabase.logger)
            for projection in Projections.all {
                let report = try await rebuilder.rebuild(projection, dryRun: true)
                #expect(report.differences == [], "\(projection.name), seed \(seed)")
            }
        }
    }
}
