import Foundation
import LedgerApplication
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The ledger's connection pool: a `PostgresClient` that can be replaced by a fresh one.
///
/// After PostgreSQL has been away, postgres-nio's pool waits longer and longer between attempts
/// to reconnect (100 ms growing by a quarter per failure, up to a minute) and, once its circuit
/// breaker has tripped, refuses every request until an attempt succeeds: a ten-second outage
/// kept it away for two or three more seconds, a minute's outage for about fifteen. Neither delay
/// can be configured. So when the `DatabaseMonitor` sees the database answer again and this pool
/// still cannot lend a connection, it calls `renew()`: the old pool is shut down, which fails the
/// requests waiting in it (their callers retry, and reach the new pool), and new requests go to a
/// new pool that connects at once.
///
/// The methods are those of `PostgresClient`, so that code reads the same against either.
public final class DatabasePool: Service, Sendable {
    private struct Pools {
        var current: PostgresClient
        var renewal = Renewal(count: 0, at: nil)
        /// Pools waiting for `run()` to start them.
        var unstarted: [PostgresClient] = []
        var wakeRunner: AsyncStream<Void>.Continuation?
    }

    private let configuration: PostgresClient.Configuration
    private let backgroundLogger: Logger
    private let pools: Mutex<Pools>
    /// Statements prepared on the pool's connections (`query(prepared:_:)`).
    let preparedStatements = PreparedStatements()
    /// How far the log reaches, as the stores using this pool have seen it: whether the hottest
    /// lookups are prepared yet (see `LogReach`).
    let logReach = LogReach()

    public init(configuration: PostgresClient.Configuration, backgroundLogger: Logger) {
        self.configuration = configuration
        self.backgroundLogger = backgroundLogger
        let first = PostgresClient(configuration: configuration, backgroundLogger: backgroundLogger)
        self.pools = Mutex(Pools(current: first, unstarted: [first]))
    }

    private var current: PostgresClient { pools.withLock { $0.current } }

    /// How many times the pool was replaced since it started, and when it was last.
    public struct Renewal: Sendable {
        public let count: Int
        public let at: ContinuousClock.Instant?
    }

    public var renewal: Renewal { pools.withLock { $0.renewal } }

    /// Whether the pool lends a connection that answers within `patience` (the attempt is given
    /// up, not awaited, after that: see `untilAbandoned`).
    public func answers(within patience: Duration, logger: Logger) async -> Bool {
        (try? await untilAbandoned(after: patience) { [self] in
            try await query("SELECT 1", logger: logger)
        }) != nil
    }

    /// Replaces the pool: from now on connections come from a new one that connects at once,
    /// whatever the old one's backoff. The old one stops now: requests waiting in it fail, and
    /// connections it lent are closed.
    public func renew() {
        let wake = pools.withLock { pools -> AsyncStream<Void>.Continuation? in
            let fresh = PostgresClient(configuration: configuration, backgroundLogger: backgroundLogger)
            pools.current = fresh
            pools.renewal = Renewal(count: pools.renewal.count + 1, at: .now)
            pools.unstarted.append(fresh)
            return pools.wakeRunner
        }
        wake?.yield()
    }

    /// How long stopping waits for the pools to close their connections.
    static let closingPatience = Duration.seconds(5)

    /// Runs the pool, and each pool that replaces it, until cancelled or shut down gracefully.
    ///
    /// Each pool runs in a task of its own that is cancelled, not awaited, when the pool is
    /// replaced: a pool waits for the connections it lent to come back before it ends, and a
    /// connection lent to a wait that PostgreSQL's going away left unanswered (see
    /// `untilAbandoned`) never comes back. Stopping waits up to `closingPatience` for the pools.
    public func run() async {
        let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        pools.withLock { $0.wakeRunner = wake }
        wake.yield()
        var running: [(client: PostgresClient, task: Task<Void, Never>)] = []
        await withGracefulShutdownHandler {
            for await _ in wakeups {
                let (started, current) = pools.withLock { pools in
                    defer { pools.unstarted = [] }
                    return (pools.unstarted, pools.current)
                }
                // The tasks inherit this one's graceful shutdown, which PostgresClient follows.
                running += started.map { client in (client, Task { await client.run() }) }
                for (client, task) in running where client !== current { task.cancel() }
                running.removeAll { $0.client !== current }
            }
        } onGracefulShutdown: {
            wake.finish()
        }
        pools.withLock { $0.wakeRunner = nil }
        // Cancelled or shutting down: every pool stops.
        let tasks = running.map(\.task)
        tasks.forEach { $0.cancel() }
        _ = try? await untilAbandoned {
            for task in tasks { await task.value }
        } abandonWhen: {
            try? await Task.sleep(for: Self.closingPatience)
            return CancellationError()
        }
    }

    // MARK: - PostgresClient's methods, on the current pool

    /// A connection the pool lends may have closed since it last looked (PostgreSQL ended that
    /// session, or went away); a statement written to it would never be answered (see
    /// `rollBackUnlessClosed`). Nothing was sent on it, so another is asked for, up to three times;
    /// then it is an outage.
    public func withConnection<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ closure: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        var attempt = 1
        while true {
            do {
                return try await current.withConnection(isolation: isolation) { connection in
                    guard !connection.isClosed else { throw ClosedWhenLent() }
                    return try await closure(connection)
                }
            } catch is ClosedWhenLent {
                guard attempt < Self.leaseAttempts else { throw StoreError.databaseUnavailable("the connection to PostgreSQL closed") }
                attempt += 1
            }
        }
    }

    private struct ClosedWhenLent: Error {}

    static let leaseAttempts = 3

    /// Runs `query` on a connection of the current pool and returns its rows, all read.
    ///
    /// Unlike `PostgresClient.query`, the wait is given up with a `databaseUnavailable` error when
    /// the connection closes under it (`unlessClosed`): a statement postgres-nio writes to a
    /// connection PostgreSQL has just dropped is never answered, and requests waited on such
    /// statements until their clients gave up (5 of some 300 in one run of the outage test).
    ///
    /// With `thenConfirmCommit`, a statement that writes outside an explicit transaction returns
    /// only once PostgreSQL has committed it: `SELECT 1` follows on the same connection, and its
    /// answer comes after the commit of the statement before (see `PostgresEventStore.append`).
    @discardableResult
    public func query(
        _ query: PostgresQuery,
        thenConfirmCommit: Bool = false,
        logger: Logger? = nil,
        file: String = #fileID,
        line: Int = #line
    ) async throws -> QueryRows {
        let logger = logger ?? Self.silent
        return try await withConnection { connection in
            QueryRows(rows: try await connection.unlessClosed(during: "a statement") {
                let rows = try await connection.allRows(query, logger: logger, file: file, line: line)
                if thenConfirmCommit { try await connection.confirmCommit(logger: logger) }
                return rows
            })
        }
    }

    /// Runs a statement postgres-nio prepares once per connection (its name and SQL are the
    /// statement type's), and collects its rows; with `thenConfirmCommit`, returns only once
    /// PostgreSQL has committed it, as `query(_:thenConfirmCommit:)` does.
    public func execute<Statement: PostgresPreparedStatement>(
        _ statement: Statement, thenConfirmCommit: Bool = false, logger: Logger? = nil
    ) async throws -> [Statement.Row] where Statement.Row: Sendable {
        let logger = logger ?? Self.silent
        return try await withConnection { connection in
            try await connection.unlessClosed(during: "a statement") {
                var rows: [Statement.Row] = []
                for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
                if thenConfirmCommit { try await connection.confirmCommit(logger: logger) }
                return rows
            }
        }
    }

    /// Runs `query` and hands each row to `body`, for reads of many rows: the rows come through
    /// postgres-nio's row sequence, which reads a large answer far faster than the future-based
    /// query `query(_:)` uses (a million rows: see docs/benchmarks.md).
    public func forEachRow(_ query: PostgresQuery, logger: Logger? = nil, _ body: (PostgresRow) throws -> Void) async throws {
        let logger = logger ?? Self.silent
        let rows = try await withConnection { connection in
            try await connection.unlessClosed(during: "a statement") {
                var rows: [PostgresRow] = []
                let sequence: PostgresRowSequence = try await connection.query(query, logger: logger)
                for try await row in sequence { rows.append(row) }
                return rows
            }
        }
        for row in rows { try body(row) }
    }

    /// Runs `statement` prepared once per connection (see `PreparedStatements`), for the reads
    /// that run most often; guarded like `query`.
    func query(prepared statement: PreparedStatements.Statement, _ arguments: [String], logger: Logger? = nil) async throws -> QueryRows {
        let logger = logger ?? Self.silent
        return try await withConnection { connection in
            QueryRows(rows: try await connection.unlessClosed(during: "a prepared statement") { [preparedStatements] in
                try await preparedStatements.execute(statement, arguments, on: connection, logger: logger)
            })
        }
    }

    private static let silent = Logger(label: "ledger.database.silent", factory: { _ in SwiftLogNoOpLogHandler() })
}

/// The rows a statement returned, all read: iterate them, `decode` them as with postgres-nio's
/// row sequence, or take them with `collect()`.
public struct QueryRows: AsyncSequence, Sendable {
    public typealias Element = PostgresRow
    public typealias Failure = any Error

    public let rows: [PostgresRow]

    public func collect() -> [PostgresRow] { rows }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var remaining: IndexingIterator<[PostgresRow]>
        public mutating func next() async throws -> PostgresRow? { remaining.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(remaining: rows.makeIterator()) }
}

extension PostgresConnection {
    /// Returns once PostgreSQL has committed the statement before on this connection: `SELECT 1`
    /// is answered only after it (see `DatabasePool.query(_:thenConfirmCommit:)`).
    func confirmCommit(logger: Logger) async throws {
        do {
            for try await _ in try await execute(CommitConfirmation(), logger: logger) {}
        } catch {
            throw StoreError.databaseUnavailable(
                "the connection failed before PostgreSQL confirmed the commit; whether it was recorded is unknown (sent again, it is recorded once): \(error)"
            )
        }
    }
}

/// `SELECT 1`, prepared once per connection: it follows every append, so PostgreSQL should not
/// parse and plan it each time.
struct CommitConfirmation: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let name = "ledger_confirm_commit"
    static let sql = "SELECT 1"
    static let bindingDataTypes: [PostgresDataType] = []

    func makeBindings() -> PostgresBindings { PostgresBindings() }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
