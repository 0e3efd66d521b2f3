import Foundation
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import Testing

/// The gauges are process-wide per projection version: this is the only test in the target that
/// runs a projection runner, so the values it reads are its own.
@Suite("Projection metrics")
struct ProjectionMetricsTests {
    @Test("a projection's position gauge reaches the head and its lag drops to 0")
    func positionAndLag() async throws {
        LedgerMetrics.bootstrap()
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let handler = UserCommandHandler(store: store, logger: TestDatabase.logger)
            for index in 0..<5 {
                _ = try await handler.defineProduct(try Product(productId: "coins.\(index)", type: .consumable), app: "com.example.metrics")
            }
            let head = try await store.headPosition()
            // Batches of 2 over 5 events: full batches (head measured) and a last short one (caught up).
            let runner = ProjectionRunner(
                client: client, listenConfiguration: nil, batchSize: 2, pollInterval: .milliseconds(50), logger: TestDatabase.logger
            )
            let reached = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await runner.run() }
                let reached = try await eventually {
                    let samples = PrometheusSamples.current()
                    return samples.value("ledger_projection_position", ["projection": "ownership"]) == Double(head)
                        && samples.value("ledger_projection_lag_events", ["projection": "ownership"]) == 0
                }
                group.cancelAll()
                return reached
            }
            #expect(reached, "position gauge: \(PrometheusSamples.current().value("ledger_projection_position", ["projection": "ownership"])), head \(head)")
        }
    }
}
