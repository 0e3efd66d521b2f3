import Foundation
import LedgerApplication
import LedgerProjections
import LedgerStore
import LedgerTesting
import Logging
import PostgresNIO

/// What a user's history length costs: the same number of events written through the decision
/// path for many users with short histories and for few users with long ones, then every live
/// projection caught up from nothing to the head of each log, as `ledger serve` does on start.
///
/// Both histories run with the same number of writers (no more than the long one has users, since
/// a user's commands are serialized on its stream), so the ratios long/short isolate the length.
public struct HistoryLengthBenchmark: Sendable {
    public struct Options: Sendable {
        public var events: Int
        public var shortHistory: Int
        public var longHistory: Int
        public var concurrency: Int

        public init(events: Int, shortHistory: Int, longHistory: Int, concurrency: Int) {
            self.events = events
            self.shortHistory = shortHistory
            self.longHistory = longHistory
            self.concurrency = concurrency
        }

        /// Writers for both runs: one per user at most in the run with fewer users.
        public var writers: Int { max(1, min(concurrency, events / longHistory)) }
    }

    /// One history's figures.
    public struct Run: Sendable {
        public let users: Int
        public let events: Int
        /// Commands the writers ran (each reads, decides and appends once).
        public let commands: Int
        public let seedSeconds: Double
        public let catchUpSeconds: Double
        /// Events the catch-up read from users' streams to fold them (besides the batches themselves).
        public var catchUpEventsRead = 0

        public var seedRate: Double { Double(events) / seedSeconds }
        public var commandRate: Double { Double(commands) / seedSeconds }
        public var catchUpRate: Double { Double(events) / catchUpSeconds }
    }

    public enum Stage: Sendable {
        case seeding(users: Int, perUser: Int)
        case seeded(Int, of: Int)
        case catchingUp(events: Int)
    }

    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// Seeds `client`'s empty database with `perUser` events for each of `options.events / perUser`
    /// users, then catches every projection up to the head with a fresh runner.
    public func run(
        _ options: Options, perUser: Int, client: DatabasePool, listen: PostgresConnection.Configuration,
        progress: @escaping @Sendable (Stage) -> Void = { _ in }
    ) async throws -> Run {
        let users = max(1, options.events / perUser)
        progress(.seeding(users: users, perUser: perUser))
        let store = PostgresEventStore(client: client, logger: logger)
        let seedStarted = ContinuousClock.now
        let seeder = HistorySeeder(ledger: PostgresLedger(client: client, logger: logger), logger: logger)
        let written = try await seeder.run(
            .init(apps: 1, users: users, events: options.events, concurrency: options.writers)
        ) { seeded in
            progress(.seeded(seeded.events, of: seeded.target))
        }
        let seedSeconds = Self.seconds(since: seedStarted)
        let head = try await store.headPosition()
        progress(.catchingUp(events: written))
        let catchUpStarted = ContinuousClock.now
        let runner = ProjectionRunner(client: client, listenConfiguration: listen, pollInterval: .milliseconds(50), logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runner.run() }
            while try await !Self.caughtUp(client, head: head, logger: logger) {
                try await Task.sleep(for: .milliseconds(20))
            }
            group.cancelAll()
        }
        var run = Run(users: users, events: written, commands: seeder.commands, seedSeconds: seedSeconds, catchUpSeconds: Self.seconds(since: catchUpStarted))
        run.catchUpEventsRead = runner.folding.eventsRead
        return run
    }

    /// Whether every projection is live at `head`.
    static func caughtUp(_ client: DatabasePool, head: Int64, logger: Logger) async throws -> Bool {
        let rows = try await client.query(
            "SELECT count(*), count(*) FILTER (WHERE status = 'live' AND position >= \(head)) FROM ledger.projections WHERE status <> 'retired'",
            logger: logger
        ).collect()
        guard let (all, caughtUp) = try rows.first?.decode((Int, Int).self) else { return false }
        return all >= Projections.all.count && caughtUp == all
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
