import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("Projections follow the log and survive being stopped at any moment")
struct ProjectionRunnerTests {
    static let app = "com.example.app"

    /// A history across many users: purchases, consumption, a refund, non-renewing stacks.
    static func seed(_ client: DatabasePool, users: Int) async throws -> UserCommandHandler {
        let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
        try await handler.defineProduct(try Product(productId: "coins", type: .consumable), app: app)
        try await handler.defineProduct(try Product(productId: "levels", type: .nonConsumable), app: app)
        try await handler.defineProduct(try Product(productId: "gold.month", type: .nonRenewing, duration: ISODuration(parsing: "P1M"), subscriptionGroup: "gold"), app: app)
        for index in 0..<users {
            let user = "u\(index)"
            let base = 1_735_689_600 + Double(index) * 3_600
            func purchase(_ suffix: String, _ product: String, quantity: Int = 1, offset: Double = 0) -> TestTransaction {
                TestTransaction("\(index)-\(suffix)", product, quantity: quantity, purchased: Date(timeIntervalSince1970: base + offset))
            }
            _ = try await handler.execute(app: app, user: user) { state, _ in
                let decision = try TestReceipts.observe(
                    [purchase("c", "coins", quantity: 5), purchase("l", "levels"), purchase("g1", "gold.month"), purchase("g2", "gold.month", offset: 60)],
                    app: app, on: state
                )
                return (decision.events, ())
            }
            _ = try await handler.execute(app: app, user: user) { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 2, deviceId: "phone", catalog: catalog, on: state), ())
            }
            if index % 3 == 0 {
                _ = try await handler.execute(app: app, user: user) { state, _ in
                    (try UserDecisions.revoke(transactionId: "\(index)-g1", revokedAt: Date(timeIntervalSince1970: base + 120), reason: "refund", on: state), ())
                }
            }
        }
        return handler
    }

    /// The rows a rebuild from scratch gives, straight from the pure projection.
    static func expectedRows(_ projection: any UserProjection.Type, _ handler: UserCommandHandler, users: Int) async throws -> Set<[String?]> {
        let catalog = try await handler.reader.catalog(app: app)
        var rows = Set<[String?]>()
        for index in 0..<users {
            let state = try await handler.reader.state(app: app, user: "u\(index)")
            for row in projection.columnValues(app: app, user: "u\(index)", state: state, catalog: catalog) {
                rows.insert([app, "u\(index)"] + row)
            }
        }
        return rows
    }

    static func tableRows(_ projection: any UserProjection.Type, _ client: DatabasePool, view: Bool = true) async throws -> Set<[String?]> {
        // Timestamps as the projection writes them, so both sides compare as text.
        let select = (["app", "user_id"] + projection.columns.map(\.name)).map { name -> String in
            projection.columns.first { $0.name == name }?.type.hasPrefix("timestamptz") == true
                ? "to_char(\(name) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
                : "\(name)::text"
        }.joined(separator: ", ")
        let table = view ? projection.name.rawValue : projection.tableName
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT array_to_string(array[\(select)], E'\\x1f', '<NULL>') FROM ledger.\(table)"),
            logger: TestDatabase.logger
        ).collect()
        return Set(try rows.map { row in
            try row.decode(String.self).split(separator: "\u{1f}", omittingEmptySubsequences: false)
                .map { $0 == "<NULL>" ? nil : String($0) }
        })
    }

    static func first(_ rows: Set<[String?]>) -> String {
        rows.map { $0.map { $0 ?? "NULL" }.joined(separator: "|") }.sorted().first ?? "none"
    }

    static func checkpoint(_ projection: any UserProjection.Type, _ client: DatabasePool) async throws -> (Int64, String, String?) {
        let rows = try await client.query(
            "SELECT position, status, error FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
            logger: TestDatabase.logger
        ).collect()
        guard let row = rows.first else { return (-1, "absent", nil) }
        return try row.decode((Int64, String, String?).self)
    }

    /// Runs `runner` until `condition` holds. The wait is generous: under the whole suite's load a
    /// runner applying one event per batch can be starved of CPU for a long time; the condition is
    /// what is asserted, never the speed.
    static func runUntil(
        _ runner: ProjectionRunner, timeout: Duration = .seconds(120), _ condition: @escaping @Sendable () async throws -> Bool
    ) async throws -> Bool {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runner.run() }
            let reached = try await eventually(timeout: timeout, condition)
            group.cancelAll()
            return reached
        }
    }

    /// Runs `runner` until every projection has applied the log up to `head` and is live (a first
    /// version on a log with history is live only once it has caught up).
    static func runUntilCaughtUp(_ runner: ProjectionRunner, _ client: DatabasePool, head: Int64) async throws -> Bool {
        try await runUntil(runner) {
            for projection in Projections.all {
                let (position, status, _) = try await checkpoint(projection, client)
                if position < head || status != ProjectionState.live.rawValue { return false }
            }
            return true
        }
    }

    @Test("every projection matches a rebuild from the pure folds; views point at the live version")
    func rowsMatchFolds() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await Self.seed(client, users: 12)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          batchSize: 25, pollInterval: .milliseconds(100), logger: TestDatabase.logger)
            #expect(try await Self.runUntilCaughtUp(runner, client, head: head))
            for projection in Projections.all {
                let expected = try await Self.expectedRows(projection, handler, users: 12)
                let actual = try await Self.tableRows(projection, client)
                #expect(actual == expected, "\(projection.name): missing \(Self.first(expected.subtracting(actual))), unexpected \(Self.first(actual.subtracting(expected)))")
                #expect(try await Self.checkpoint(projection, client).1 == "live")
            }
            // The six projections followed the same batches: most of them took another's fold of
            // a user instead of reading and folding the stream again.
            let (folds, shared) = try #require(runner.batches.folds).counts
            #expect(folds > 0 && shared >= 3 * folds, "\(folds) folds made, \(shared) asks answered with another projection's fold")
            // Each batch's folds started from the previous batch's, with the batch's own events:
            // no user's stream was read from the log besides the batches.
            let kept = try #require(runner.batches.folds).kept.counts
            #expect(kept.reads > 0 && kept.eventsRead == 0, "\(kept.eventsRead) events read in \(kept.reads) folds")
            let balances = try await client.query(
                "SELECT DISTINCT balance, overdrawn FROM ledger.consumable_balances", logger: TestDatabase.logger
            ).collect()
            #expect(try balances.map { try $0.decode((Int64, Bool).self) }.map(\.0) == [Int64(3)])
            // Users with index % 3 == 0 had their first month refunded: one period left.
            let gold = try await client.query(
                "SELECT expires_at - owned_since FROM ledger.ownership WHERE user_id = 'u0' AND product_id = 'gold.month'",
                logger: TestDatabase.logger
            ).collect()
            #expect(gold.count == 1)
        }
    }

    @Test("live projections follow together: each batch is read once and written, every table and checkpoint, in one transaction")
    func liveProjectionsWriteEachBatchTogether() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          batchSize: 25, pollInterval: .milliseconds(100), logger: TestDatabase.logger)
            // Registered on the empty log: every first version is live at once.
            try await runner.prepare()
            let handler = try await Self.seed(client, users: 12)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            #expect(try await Self.runUntilCaughtUp(runner, client, head: head))
            for projection in Projections.all {
                let expected = try await Self.expectedRows(projection, handler, users: 12)
                let actual = try await Self.tableRows(projection, client)
                #expect(actual == expected, "\(projection.name): missing \(Self.first(expected.subtracting(actual))), unexpected \(Self.first(actual.subtracting(expected)))")
            }
            // The log was written before the runner started: full batches of 25, each one
            // transaction for the six tables, not one per table.
            let batches = Int((head + 24) / 25)
            #expect(runner.writes.current.transactions == batches, "\(runner.writes.current.transactions) transactions for \(batches) batches")
        }
    }

    @Test("versions built beside a log with history follow on their own until they go live, then together: one transaction per batch")
    func builtVersionsJoinTheLiveOnesOnceLive() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await Self.seed(client, users: 6)
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          batchSize: 25, pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            // Registered on a log with history: every version builds, on its own, then switches over.
            #expect(try await Self.runUntil(runner) {
                let head = try await store.headPosition()
                for projection in Projections.all where try await Self.checkpoint(projection, client) != (head, "live", nil) { return false }
                // Then each later command is one batch, written in one transaction for all six.
                let before = runner.writes.current.transactions
                _ = try await handler.execute(app: Self.app, user: "u0") { state, catalog in
                    (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
                }
                let after = try await store.headPosition()
                guard try await eventually(timeout: .seconds(30), {
                    for projection in Projections.all where try await Self.checkpoint(projection, client).0 < after { return false }
                    return true
                }) else { return false }
                return runner.writes.current.transactions - before == 1
            })
            for projection in Projections.all {
                let expected = try await Self.expectedRows(projection, handler, users: 6)
                #expect(try await Self.tableRows(projection, client) == expected, "\(projection.name)")
            }
        }
    }

    @Test("rows one live table refuses stop that projection only: the others, which followed with it, go on to the head")
    func aRefusalAmongLiveProjectionsStopsOnlyTheOneAtFault() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let faulty = ConsumableBalancesProjection.self
            let sound: [any UserProjection.Type] = [OwnershipProjection.self, AuditTrailProjection.self]
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          projections: [faulty] + sound, batchSize: 10, pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            try await runner.prepare()
            let handler = try await Self.seed(client, users: 6)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            try await TestDatabase.withOwnerConnection(of: client) {
                try await $0.query("ALTER TABLE ledger.\(unescaped: faulty.tableName) ADD CONSTRAINT refuse_u3 CHECK (user_id <> 'u3')", logger: TestDatabase.logger)
            }
            #expect(try await Self.runUntil(runner) {
                let stopped = try await Self.checkpoint(faulty, client).1 == ProjectionState.failed.rawValue
                var others = true
                for projection in sound where try await Self.checkpoint(projection, client) != (head, "live", nil) { others = false }
                return stopped && others
            })
            let (position, _, error) = try await Self.checkpoint(faulty, client)
            #expect(error?.contains("refuse_u3") == true, "\(error ?? "")")
            // Stopped at the batch holding u3's first rows, everything before it applied.
            let stored = try await client.query(
                """
                SELECT p.error_position, (SELECT min(position) FROM ledger.events WHERE stream_id = \("user/\(Self.app)/u3"))
                FROM ledger.projections p WHERE p.name = \(faulty.name)
                """,
                logger: TestDatabase.logger
            ).collect()
            let (errorPosition, firstOfU3) = try #require(try stored.first?.decode((Int64, Int64).self))
            #expect(errorPosition == position + 1 && position < firstOfU3 && firstOfU3 < position + 1 + 10, "stopped at \(errorPosition), u3 starts at \(firstOfU3)")
            for projection in sound {
                let expected = try await Self.expectedRows(projection, handler, users: 6)
                #expect(try await Self.tableRows(projection, client) == expected, "\(projection.name)")
            }
        }
    }

    @Test("a runner stopped mid-way resumes to exactly the rows a clean rebuild gives")
    func resumeAfterStop() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await Self.seed(client, users: 20)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            let make = {
                ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                 projections: [ConsumableBalancesProjection.self], batchSize: 7,
                                 pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            }
            // Stop it as soon as it has applied something, well before the head.
            #expect(try await Self.runUntil(make()) {
                try await Self.checkpoint(ConsumableBalancesProjection.self, client).0 > 0
            })
            let stoppedAt = try await Self.checkpoint(ConsumableBalancesProjection.self, client).0
            #expect(stoppedAt < head)
            // More history arrives while it is down.
            _ = try await handler.execute(app: Self.app, user: "u1") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 3, deviceId: "phone", catalog: catalog, on: state), ())
            }
            let newHead = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            #expect(try await Self.runUntil(make()) {
                try await Self.checkpoint(ConsumableBalancesProjection.self, client) == (newHead, "live", nil)
            })
            let expected = try await Self.expectedRows(ConsumableBalancesProjection.self, handler, users: 20)
            #expect(try await Self.tableRows(ConsumableBalancesProjection.self, client) == expected)
        }
    }

    @Test("an event this code cannot read stops the projection at its position; nothing is skipped")
    func unknownEventStops() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let handler = try await Self.seed(client, users: 2)
            _ = handler
            let odd = try await store.append(
                [try NewEvent(type: EventTypeName("GiftCardRedeemed", version: 1), data: #"{"amount":"10"}"#)],
                to: StreamID.user(app: Self.app, user: "u0"), expecting: .any
            )
            // One projection is enough to show the stop, and one event per batch shows exactly where.
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                          projections: [OwnershipProjection.self], batchSize: 1, pollInterval: .milliseconds(50),
                                          logger: TestDatabase.logger)
            #expect(try await Self.runUntil(runner) {
                try await Self.checkpoint(OwnershipProjection.self, client).1 == "failed"
            })
            let (position, _, error) = try await Self.checkpoint(OwnershipProjection.self, client)
            #expect(position == odd.position - 1, "everything before it applied, it not")
            #expect(error?.contains("GiftCardRedeemed.v1") == true)
            let stored = try await client.query(
                "SELECT error_position FROM ledger.projections WHERE name = 'ownership'", logger: TestDatabase.logger
            ).collect()
            #expect(try stored[0].decode(Int64?.self) == odd.position)
        }
    }
}

@Suite("COPY text escaping")
struct CopyTextTests {
    @Test("tabs, newlines, backslashes and NULLs survive")
    func escaping() {
        #expect(CopyText.line(["a\tb", nil, "c\\d\ne"]) == "a\\tb\t\\N\tc\\\\d\\ne\n")
    }
}
