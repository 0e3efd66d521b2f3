import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

/// A balance projection with a bug: it ignores revocations.
enum BuggyBalances: UserProjection {
    static let name: ProjectionName = "test_balances"
    static let version = 1
    static let columns = [ProjectionColumn("product_id", "text NOT NULL", "product"), ProjectionColumn("balance", "bigint NOT NULL", "units")]
    static let keyColumns = ["product_id"]

    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [TextRow] {
        let purchased = state.transactionsInOrder.filter { $0.productId == "coins" && $0.kind == .purchase }.reduce(0) { $0 + $1.quantity }
        return purchased == 0 ? [] : [TextRow(columnValues: ["coins", String(purchased - state.consumed["coins", default: 0])])]
    }
}

/// The fix, as a new version.
enum FixedBalances: UserProjection {
    static let name: ProjectionName = "test_balances"
    static let version = 2
    static let columns = BuggyBalances.columns
    static let keyColumns = BuggyBalances.keyColumns

    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [TextRow] {
        state.transactionsInOrder.contains { $0.productId == "coins" } ? [TextRow(columnValues: ["coins", String(state.balance(of: "coins"))])] : []
    }
}

/// The fix with two columns version 1 lacked: one it says what version 1 meant by (its balance),
/// one it does not.
enum FixedBalancesWithMoreColumns: UserProjection {
    static let name: ProjectionName = "test_balances"
    static let version = 3
    static let columns = BuggyBalances.columns + [
        ProjectionColumn("balance_shown", "bigint NOT NULL", "the balance as shown", formerly: "r.balance"),
        ProjectionColumn("note", "text NOT NULL", "new information"),
    ]
    static let keyColumns = BuggyBalances.keyColumns

    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [TextRow] {
        FixedBalances.rows(app: app, user: user, state: state, catalog: catalog).map {
            TextRow(columnValues: $0.columnValues + [$0.columnValues[1], "new"])
        }
    }
}

@Suite("Replaying history into a fixed projection")
struct ProjectionRebuilderTests {
    @Test("a dry run names exactly the rows the fix changes, with before and after; the rebuild then switches")
    func dryRunThenSwitch() async throws {
        try await TestDatabase.withDatabase { client, settings in
            // Users u0, u3, u6, u9 had a purchase revoked; the buggy version still counts it.
            let handler = try await ProjectionRunnerTests.seed(client, users: 10)
            let revoked = Set([0, 3, 6, 9].map { "u\($0)" })
            for user in revoked {
                _ = try await handler.execute(app: ProjectionRunnerTests.app, user: user) { state, _ in
                    (try UserDecisions.revoke(transactionId: "\(user.dropFirst())-c", revokedAt: Date(), reason: "refund", on: state), ())
                }
            }
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          projections: [BuggyBalances.self], batchSize: 50, pollInterval: .milliseconds(50),
                                          logger: TestDatabase.logger)
            #expect(try await ProjectionRunnerTests.runUntil(runner) {
                try await ProjectionRunnerTests.checkpoint(BuggyBalances.self, client) == (head, "live", nil)
            })

            let rebuilder = ProjectionRebuilder(client: client, logger: TestDatabase.logger)
            let report = try await rebuilder.rebuild(FixedBalances.self, dryRun: true)
            let differences = try #require(report.differences)
            #expect(Set(differences.map(\.user)) == revoked)
            #expect(differences.allSatisfy { $0.change == .changed })
            let u0 = try #require(differences.first { $0.user == "u0" })
            #expect(u0.before?["balance"] == "3")
            #expect(u0.after?["balance"] == "-2", "5 bought, 2 used, the 5 refunded")
            #expect(u0.key["product_id"] == "coins")
            #expect(report.liveVersion == 1)
            // Nothing switched, nothing left behind.
            #expect(try await ProjectionRunnerTests.checkpoint(BuggyBalances.self, client).1 == "live")
            let leftovers = try await client.query("SELECT to_regclass('ledger.test_balances_v2_rebuild') IS NULL", logger: TestDatabase.logger).collect()
            #expect(try leftovers[0].decode(Bool.self))

            // Against a version without some of its columns: those it says what the old version
            // meant by are compared, the others are not.
            let wider = try #require(try await rebuilder.rebuild(FixedBalancesWithMoreColumns.self, dryRun: true).differences)
            #expect(Set(wider.map(\.user)) == revoked)
            let widerU0 = try #require(wider.first { $0.user == "u0" })
            #expect(widerU0.before?["balance_shown"] == "3" && widerU0.after?["balance_shown"] == "-2", "\(widerU0)")
            #expect(widerU0.before?["note"] == nil && widerU0.after?["note"] == nil, "not compared: version 1 had no note")

            let switched = try await rebuilder.rebuild(FixedBalances.self, dryRun: false)
            #expect(switched.differences == nil)
            #expect(try await ProjectionRunnerTests.checkpoint(FixedBalances.self, client).1 == "live")
            #expect(try await ProjectionRunnerTests.checkpoint(BuggyBalances.self, client).1 == "retired")
            let balances = try await client.query(
                "SELECT user_id, balance FROM ledger.test_balances WHERE user_id IN ('u0', 'u1') ORDER BY user_id",
                logger: TestDatabase.logger
            ).collect()
            #expect(try balances.map { try $0.decode((String, Int64).self) }.map(\.1) == [Int64(-2), 3])
            let oldTable = try await client.query("SELECT to_regclass('ledger.test_balances_v1') IS NULL", logger: TestDatabase.logger).collect()
            #expect(try oldTable[0].decode(Bool.self), "the old version's table is dropped")
        }
    }

    @Test("rebuilding the live version gives the same rows and an empty dry-run diff")
    func sameVersionRebuild() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await ProjectionRunnerTests.seed(client, users: 8)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          batchSize: 10, pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: head))
            let rebuilder = ProjectionRebuilder(client: client, logger: TestDatabase.logger)
            for projection in Projections.all {
                let report = try await rebuilder.rebuild(projection, dryRun: true)
                #expect(report.differences == [], "\(projection.name): incremental and rebuilt rows agree")
            }
            let rebuilt = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: false)
            #expect(rebuilt.position >= head)
            let expected = try await ProjectionRunnerTests.expectedRows(AuditTrailProjection.self, handler, users: 8)
            #expect(try await ProjectionRunnerTests.tableRows(AuditTrailProjection.self, client) == expected)
        }
    }
}
