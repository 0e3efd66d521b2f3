import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

/// A prepared statement runs on the one plan PostgreSQL keeps for every argument (the generic
/// plan), which cannot know that a command reads a stream after a version near its head. On a log
/// of a few long streams, the shape most likely to mislead it, the plans kept for the hottest
/// lookups must still read the log by index, never walk it.
@Suite("The plans kept for prepared lookups read the log by index on a log of a few long streams")
struct KeptPlansTests {
    static let app = "com.example.app"

    /// The plan PostgreSQL keeps for `sql` with these arguments, as `EXPLAIN` prints it.
    static func keptPlan(_ sql: String, types: [String], arguments: [String], on connection: PostgresConnection) async throws -> String {
        _ = try await connection.query("SET plan_cache_mode = force_generic_plan", logger: TestDatabase.logger).get()
        _ = try await connection.query(
            PostgresQuery(unsafeSQL: "PREPARE kept_plan (\(types.joined(separator: ", "))) AS \(sql)"), logger: TestDatabase.logger
        ).get()
        let literals = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")
        let rows = try await connection.query(PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE kept_plan(\(literals))"), logger: TestDatabase.logger).get()
        _ = try await connection.query("DEALLOCATE kept_plan", logger: TestDatabase.logger).get()
        return try rows.rows.map { try $0.decode(String.self) }.joined(separator: "\n")
    }

    @Test func theCommandsReadAndTheEntitlementsReadKeepPlansThatReadByIndex() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            // Two users of 1,500 events each, and a catalog: three streams, as in `bench history --long`.
            for user in ["alice", "bob"] {
                let stream = try StreamID.user(app: Self.app, user: user)
                for batch in 0..<15 {
                    let events = try (0..<100).map { try NewEvent.purchase("\(user)-\(batch * 100 + $0)", app: Self.app) }
                    _ = try await store.append(events, to: stream, expecting: .any)
                }
            }
            _ = try await store.append([try .purchase("catalog-1", app: Self.app, deduplicate: false)], to: try StreamID.catalog(app: Self.app),
                                       expecting: .any)
            // The projections' tables, and the views the entitlements read names pointed at them
            // (as a projection's switch to live does).
            try await ProjectionRunner(client: client, listenConfiguration: nil, logger: TestDatabase.logger).prepare()
            try await TestDatabase.withOwnerConnection(of: client) { owner in
                _ = try await owner.query(
                    """
                    SELECT ledger.projection_point_view(name, name || '_v' || version) FROM ledger.projections
                    WHERE name IN ('ownership', 'subscription_periods', 'consumable_balances')
                    """,
                    logger: TestDatabase.logger
                ).get()
                _ = try await owner.query("ANALYZE ledger.events", logger: TestDatabase.logger).get()

                let read = try #require(PostgresEventStore.commandReads[4])
                let keys = PreparedStatements.padded(["appstore/\(Self.app)/sandbox/payment/alice-3"], to: 4)
                let plan = try await Self.keptPlan(
                    read.sql, types: read.types,
                    arguments: ["catalog/\(Self.app)", "user/\(Self.app)/alice", "1", "1490", "3001"] + keys, on: owner
                )
                #expect(plan.contains("events_stream_version_key"), "\(plan)")
                #expect(!plan.contains("events_pkey") && !plan.contains("Seq Scan on events"), "\(plan)")

                let entitlements = try await Self.keptPlan(
                    UserReadModels.entitlementsStatement, types: ["text", "text", "text"],
                    arguments: [Self.app, "nobody", "user/\(Self.app)/nobody"], on: owner
                )
                #expect(!entitlements.contains("Seq Scan on events"), "an unknown user is not looked for through the whole log: \(entitlements)")
            }
        }
    }
}
