import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import Testing

/// The gauges are process-wide per database and projection version: the runner here reports under
/// a database label of its own, so runners of other tests never overwrite the values it reads.
@Suite("Projection metrics")
struct ProjectionMetricsTests {
    @Test("a projection's position gauge reaches the head and its lag drops to 0")
    func positionAndLag() async throws {
        LedgerMetrics.bootstrap()
        let database = "metrics-test-\(UInt32.random(in: 0...UInt32.max))"
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let handler = UserCommandHandler(store: store, logger: TestDatabase.logger)
            for index in 0..<5 {
                _ = try await handler.defineProduct(try Product(productId: "coins.\(index)", type: .consumable), app: "com.example.metrics")
            }
            let head = try await store.headPosition()
            // Batches of 2 over 5 events: full batches (head measured) and a last short one (caught up).
            let runner = ProjectionRunner(
                client: client, listenConfiguration: nil, batchSize: 2, pollInterval: .milliseconds(50),
                metricsDatabase: database, logger: TestDatabase.logger
            )
            let reached = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await runner.run() }
                // Generous: the runner's gap guard waits for every older transaction of the whole
                // PostgreSQL server, and other tests hold some open on purpose.
                let reached = try await eventually(timeout: .seconds(120)) {
                    let samples = PrometheusSamples.current()
                    return samples.value("ledger_projection_position", ["database": database, "projection": "ownership"]) == Double(head)
                        && samples.value("ledger_projection_lag_events", ["database": database, "projection": "ownership"]) == 0
                }
                group.cancelAll()
                return reached
            }
            #expect(reached, "position gauge: \(PrometheusSamples.current().value("ledger_projection_position", ["database": database, "projection": "ownership"])), head \(head)")
        }
    }
}
