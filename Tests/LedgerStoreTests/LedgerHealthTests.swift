import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

@Suite("Health is cheap however long the log, and says when projections stall, fail or are held back")
struct LedgerHealthTests {
    static let logger = TestDatabase.logger

    /// Appends `count` events in batches of 100 to a stream no projection reads.
    static func append(_ count: Int, _ store: PostgresEventStore, from start: Int = 0) async throws {
        for batch in stride(from: start, to: start + count, by: 100) {
            let events = try (batch..<min(batch + 100, start + count)).map { try NewEvent.purchase("bulk-\($0)", deduplicate: false) }
            _ = try await store.append(events, to: try StreamID("test/bulk"), expecting: .any)
        }
    }

    /// Pages a query touches (shared buffers hit or read), from PostgreSQL's own count.
    static func pagesTouched(_ client: DatabasePool, _ query: PostgresQuery) async throws -> Int {
        let explain = PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query.sql)
        let rows = try await client.query(explain, logger: logger).collect()
        let json = try #require(try rows.first?.decode(String.self))
        let plans = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        let plan = try #require(plans.first?["Plan"] as? [String: Any])
        return (plan["Shared Hit Blocks"] as? Int ?? 0) + (plan["Shared Read Blocks"] as? Int ?? 0)
    }

    @Test("the status /health reads touches as few pages with 20,000 events past a checkpoint as with 2,000, where counting them reads hundreds")
    func constantCost() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: Self.logger)
            // A version at position 0, as a new one is: every event is past its checkpoint.
            try await client.query(
                "INSERT INTO ledger.projections (name, version, status) VALUES ('ownership', 1, 'building')", logger: Self.logger
            )
            try await Self.append(2_000, store)
            _ = try await Self.pagesTouched(client, ProjectionStatus.query)  // hint bits set on the first run
            let small = try await Self.pagesTouched(client, ProjectionStatus.query)
            try await Self.append(18_000, store, from: 2_000)
            _ = try await Self.pagesTouched(client, ProjectionStatus.query)
            let large = try await Self.pagesTouched(client, ProjectionStatus.query)
            // What /health did before: count the events past each checkpoint. Counted by a column,
            // so that it reads the rows as it did: once autovacuum has set the visibility map
            // (under a loaded suite it sometimes has), count(*) reads the position index alone.
            let counting = try await Self.pagesTouched(client, "SELECT count(e.data) FROM ledger.events e WHERE e.position > 0")
            #expect(large <= small + 3, "pages touched: \(small) with 2,000 events, \(large) with 20,000")
            #expect(large < 40 && counting > 10 * large, "pages touched with 20,000 events: \(large); counting them: \(counting)")
            let status = try #require(try await ProjectionStatus.all(client, logger: Self.logger).first)
            #expect(status.lagPositions == 20_000 && status.head == 20_000)
        }
    }

    @Test("a projection behind a moving head with a still checkpoint is stalled; one that just received an event after a quiet hour is not")
    func stalls() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 3)
            let store = PostgresEventStore(client: client, logger: Self.logger)
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          projections: [OwnershipProjection.self], pollInterval: .milliseconds(50), logger: Self.logger)
            let head = try await store.headPosition()
            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                try await ProjectionRunnerTests.checkpoint(OwnershipProjection.self, client) == (head, "live", nil)
            })
            let quick = LedgerHealth.Thresholds(stall: .seconds(1), longTransaction: .seconds(60))
            #expect(try await LedgerHealth.read(client, thresholds: quick, logger: Self.logger).problems == [], "caught up")

            // Quiet for an hour, then one event: behind, but only just.
            try await client.query(
                "UPDATE ledger.projections SET checkpoint_moved_at = now() - interval '1 hour'", logger: Self.logger
            )
            _ = try await handler.execute(app: ProjectionRunnerTests.app, user: "u1") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
            }
            let patient = LedgerHealth.Thresholds(stall: .seconds(30), longTransaction: .seconds(60))
            let fresh = try await LedgerHealth.read(client, thresholds: patient, logger: Self.logger)
            let behind = try #require(fresh.projections.first)
            #expect(behind.lagPositions > 0 && behind.lagSeconds < 30, "\(behind)")
            #expect(fresh.problems == [], "a new event is not a stall: \(fresh.problems)")

            // Nothing applies it: once the threshold has passed, it is a stall, named with where it stands.
            #expect(try await eventually(timeout: .seconds(30)) {
                try await LedgerHealth.read(client, thresholds: quick, logger: Self.logger).isDegraded
            })
            let stalled = try await LedgerHealth.read(client, thresholds: quick, logger: Self.logger)
            #expect(stalled.problems.count == 1)
            #expect(stalled.problems.first?.contains("ownership v\(OwnershipProjection.version) is stalled at position \(head)") == true,
                    "\(stalled.problems)")
            #expect(stalled.projections.first?.isStalled(after: quick.stall) == true)

            // The runner catches up: healthy again.
            let newHead = try await store.headPosition()
            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                try await ProjectionRunnerTests.checkpoint(OwnershipProjection.self, client).0 >= newHead
            })
            #expect(try await LedgerHealth.read(client, thresholds: quick, logger: Self.logger).problems == [])
        }
    }

    @Test("a transaction holding the followers back past the threshold is named with its pid and age, until it ends")
    func longTransaction() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let thresholds = LedgerHealth.Thresholds(stall: .seconds(600), longTransaction: .seconds(1))
            try await TestDatabase.withConnection(settings) { holder in
                let pid = try #require(try await holder.query("SELECT pg_backend_pid()", logger: Self.logger).collect().first?.decode(Int32.self))
                try await holder.query("BEGIN", logger: Self.logger)
                // A transaction id, as any write takes: the followers' horizon is now this transaction.
                try await holder.query("SELECT pg_current_xact_id()", logger: Self.logger)
                #expect(try await eventually(timeout: .seconds(30)) {
                    try await LedgerHealth.read(client, thresholds: thresholds, logger: Self.logger).heldBy?.pid == pid
                })
                let health = try await LedgerHealth.read(client, thresholds: thresholds, logger: Self.logger)
                let heldBy = try #require(health.heldBy)
                #expect((heldBy.seconds ?? 0) > 1)
                #expect(heldBy.state == "idle in transaction")
                #expect(health.isDegraded)
                #expect(health.problems.first?.contains("pid \(pid)") == true, "\(health.problems)")
                #expect(health.problems.first?.contains("pg_terminate_backend(\(pid))") == true)
                try await holder.query("COMMIT", logger: Self.logger)
            }
            // Once it ends, nothing holds the followers back. Polled: on a loaded machine another
            // session's statement can itself run past the 1 s threshold for a moment (once in CI).
            #expect(try await eventually(timeout: .seconds(30)) {
                let after = try await LedgerHealth.read(client, thresholds: thresholds, logger: Self.logger)
                return after.heldBy == nil && !after.isDegraded
            })
        }
    }

    @Test("a failed version degrades health with its error and position; retired versions are left out")
    func failedAndRetired() {
        func status(_ name: String, _ version: Int, _ state: ProjectionState, at position: Int64, error: String? = nil) -> ProjectionStatus {
            ProjectionStatus(name: name, version: version, status: state, position: position, head: 90, checkpointMovedAt: Date(),
                             secondsSinceMoved: 3_600, pendingSeconds: 3_600, error: error, errorPosition: error == nil ? nil : position + 1)
        }
        let thresholds = LedgerHealth.Thresholds()
        let health = LedgerHealth.judge(
            [status("ownership", 3, .failed, at: 41, error: "cannot read event at position 42 (GiftCardRedeemed.v1)"),
             status("ownership", 2, .retired, at: 10),
             status("audit_trail", 2, .live, at: 90)],
            head: 90, holder: nil, thresholds: thresholds
        )
        #expect(health.projections.map(\.name) == ["ownership", "audit_trail"])
        #expect(health.problems == [
            "projection ownership v3 failed at position 42: cannot read event at position 42 (GiftCardRedeemed.v1); fix the cause, then restart the ledger or rebuild it (`ledger projections rebuild ownership`)",
        ])
        // Caught up, however long ago its checkpoint moved: not behind, not stalled.
        #expect(health.projections[1].lagSeconds == 0 && !health.projections[1].isStalled(after: .seconds(1)))
    }
}
