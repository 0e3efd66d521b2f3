import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import LedgerTesting
import Logging
import PostgresNIO

/// What a catalog edit costs the live projections of an app with many users: how long until
/// every projection is back at the head of the log, and the largest transaction it took.
///
/// Every user lives one seeded round; one user in `buyersEvery` also buys `gems.pack` before the
/// catalog defines it. Then, with every projection live at the head: a price change of a product
/// every user bought (which applies to later facts only), and the first definition of `gems.pack`
/// (which classifies its earlier purchases).
public struct CatalogChangeBenchmark: Sendable {
    public struct Options: Sendable {
        public var users: Int
        public var buyersEvery: Int
        public var concurrency: Int

        public init(users: Int, buyersEvery: Int, concurrency: Int) {
            self.users = users
            self.buyersEvery = buyersEvery
            self.concurrency = concurrency
        }
    }

    /// One catalog edit's figures.
    public struct Change: Sendable {
        public let name: String
        /// Users with an event naming the product before the edit (those the edit could change).
        public let buyers: Int
        public let seconds: Double
        public let transactions: Int
        public let rows: Int
        public let largestRows: Int
    }

    public struct Result: Sendable {
        public let users: Int
        public let events: Int
        public let seedSeconds: Double
        public let catchUpSeconds: Double
        public let changes: [Change]
    }

    public enum Stage: Sendable {
        case seeded(Int, of: Int)
        case catchingUp(events: Int)
        case changing(String)
    }

    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func run(
        _ options: Options, client: DatabasePool, listen: PostgresConnection.Configuration,
        progress: @escaping @Sendable (Stage) -> Void = { _ in }
    ) async throws -> Result {
        let store = PostgresEventStore(client: client, logger: logger)
        let seeder = HistorySeeder(ledger: PostgresLedger(client: client, logger: logger), logger: logger)
        let app = HistorySeeder.app(0)
        let seedStarted = ContinuousClock.now
        var written = try await seeder.run(.init(apps: 1, users: options.users, events: 1, concurrency: options.concurrency)) { seeded in
            progress(.seeded(seeded.events, of: seeded.target))
        }
        let buyers = Array(stride(from: 0, to: options.users, by: max(1, options.buyersEvery)))
        written += try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<options.concurrency {
                group.addTask {
                    var count = 0
                    for index in stride(from: worker, to: buyers.count, by: options.concurrency) {
                        count += try await seeder.purchase("gems.pack", quantity: 5, user: buyers[index], app: app)
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let seedSeconds = HistoryLengthBenchmark.seconds(since: seedStarted)

        progress(.catchingUp(events: written))
        let runner = ProjectionRunner(client: client, listenConfiguration: listen, pollInterval: .milliseconds(50), logger: logger)
        let handler = UserCommandHandler(store: store, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runner.run() }
            defer { group.cancelAll() }
            let catchUpStarted = ContinuousClock.now
            try await waitForHead(store.headPosition(), client: client)
            let catchUpSeconds = HistoryLengthBenchmark.seconds(since: catchUpStarted)

            var changes: [Change] = []
            let edits: [(String, Product)] = [
                ("price change of coins.100 (bought by every user)",
                 try Product(productId: "coins.100", type: .consumable, referenceName: "100 coins", prices: ["USD": "1.19", "EUR": "1.09"])),
                ("first definition of gems.pack (bought before it)",
                 try Product(productId: "gems.pack", type: .consumable, referenceName: "Gems", prices: ["USD": "4.99"])),
            ]
            for (name, product) in edits {
                progress(.changing(name))
                let buyers = try await usersWithEvents(naming: product.productId, app: app, client: client)
                runner.writes.resetLargest()
                let before = runner.writes.current
                let started = ContinuousClock.now
                guard let defined = try await handler.defineProduct(product, app: app) else { continue }
                try await waitForHead(defined.position, client: client)
                let seconds = HistoryLengthBenchmark.seconds(since: started)
                let after = runner.writes.current
                changes.append(Change(name: name, buyers: buyers, seconds: seconds, transactions: after.transactions - before.transactions,
                                      rows: after.rows - before.rows, largestRows: after.largestRows))
            }
            return Result(users: options.users, events: written, seedSeconds: seedSeconds, catchUpSeconds: catchUpSeconds, changes: changes)
        }
    }

    /// Waits until every projection is live at `position` or past it.
    private func waitForHead(_ position: Int64, client: DatabasePool) async throws {
        while try await !HistoryLengthBenchmark.caughtUp(client, head: position, logger: logger) {
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    private func usersWithEvents(naming product: String, app: String, client: DatabasePool) async throws -> Int {
        let rows = try await client.query(
            """
            SELECT count(DISTINCT stream_id) FROM ledger.events
            WHERE COALESCE(data -> 'fields' ->> 'product_id', data ->> 'productId') = \(product)
              AND starts_with(stream_id, \(StreamID.userPrefix(app: app)))
            """,
            logger: logger
        ).collect()
        return try rows.first?.decode(Int.self) ?? 0
    }
}
