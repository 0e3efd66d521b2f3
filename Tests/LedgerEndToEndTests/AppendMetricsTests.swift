import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import Testing

/// The counters are process-wide and other suites may append at the same time, so increases are
/// checked as "at least"; the test's own appends are the only ones guaranteed.
@Suite("Append metrics")
struct AppendMetricsTests {
    static func purchase(_ transactionID: String) throws -> NewEvent {
        try NewEvent(
            type: EventTypeName("PurchaseRecorded", version: 1),
            data: #"{"transactionId":"\#(transactionID)","productId":"coins.100","quantity":1}"#,
            metadata: #"{"requestId":"metrics-test"}"#,
            deduplicationKey: .appStoreTransaction(app: "com.example.metrics", environment: .sandbox, kind: .payment, transactionID: transactionID)
        )
    }

    @Test("appends, duplicates and version conflicts show up in /metrics")
    func countsAppendOutcomes() async throws {
        LedgerMetrics.bootstrap()
        try await TestDatabase.withDatabase { client, _ in
            // Made after the bootstrap: a store binds its metrics when it is made.
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID.user(app: "com.example.metrics", user: "u1")
            let before = PrometheusSamples.current()

            _ = try await store.append([try Self.purchase("1"), try Self.purchase("2")], to: stream, expecting: .noStream)
            let again = try await store.append([try Self.purchase("2"), try Self.purchase("3")], to: stream, expecting: .any)
            #expect(again.appendedCount == 1)
            await #expect(throws: StoreError.self) {
                try await store.append([try Self.purchase("4")], to: stream, expecting: .noStream)
            }

            let after = PrometheusSamples.current()
            #expect(after.increase("ledger_events_appended_total", since: before) >= 3)
            #expect(after.increase("ledger_append_duplicates_total", since: before) >= 1)
            #expect(after.increase("ledger_append_conflicts_total", since: before) >= 1)
            #expect(after.increase("ledger_append_duration_seconds_count", since: before) >= 3)
        }
    }
}
