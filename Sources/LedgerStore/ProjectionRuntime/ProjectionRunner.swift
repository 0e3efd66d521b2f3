import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Keeps every projection's tables up to date with the log.
///
/// The live projection versions follow the log together through the gap-safe follower: each
/// batch of events is read once, every user it touched is folded once (up to the batch's last
/// position), and every live table's rows of those users and every live checkpoint are written
/// in one transaction: a crash at any moment resumes to exactly the rows a rebuild gives. A
/// version being built follows on its own, beside the live one, and takes over, atomically, once
/// it has caught up. A deterministic error (an event it cannot decode, a fold that fails, rows the
/// database refuses) stops the projection at fault with the reason and the position (see
/// `ledger.projections`); the others keep going, and a lost database is retried within seconds.
public struct ProjectionRunner: Service {
    let client: DatabasePool
    let store: PostgresEventStore
    let batches: ProjectionBatchWriter
    /// The rows this runner's batches wrote, transaction by transaction.
    public var writes: WriteStatistics { batches.statistics }
    /// How many users' folds this runner's batches asked for, and how many events those read from
    /// the log: near the number of events applied when folds move on from where they were kept.
    public var folding: (reads: Int, eventsRead: Int) { batches.folds?.kept.counts ?? (0, 0) }
    let listenConfiguration: PostgresConnection.Configuration?
    let projections: [any UserProjection.Type]
    let batchSize: Int
    let pollInterval: Duration
    /// The `database` label of this runner's gauges (several ledgers may report to one Prometheus).
    let metricsDatabase: String
    let logger: Logger

    public init(
        client: DatabasePool,
        listenConfiguration: PostgresConnection.Configuration?,
        projections: [any UserProjection.Type] = Projections.all,
        batchSize: Int = 1_000,
        pollInterval: Duration = .seconds(1),
        metricsDatabase: String? = nil,
        logger: Logger
    ) {
        self.metricsDatabase = metricsDatabase ?? listenConfiguration?.database ?? "ledger"
        self.client = client
        self.store = PostgresEventStore(client: client, logger: logger)
        // Live projections follow the same batches: each touched user is read and folded once
        // per batch for all of them.
        self.batches = ProjectionBatchWriter(client: client, folds: SharedFolds(positionsKept: 2 * projections.count + 2), logger: logger)
        self.listenConfiguration = listenConfiguration
        self.projections = projections
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.logger = logger
    }

    /// Follows the log for every projection until cancelled or gracefully shut down. A batch in
    /// flight at shutdown rolls back and is applied again at the next start.
    ///
    /// A projection that failed stops, but the runner does not: when every projection has stopped
    /// it waits for the shutdown, since a service ending early would end the whole server, which
    /// still records purchases and whose `/health` says what failed.
    public func run() async throws {
        // Another server may have led meanwhile, and written rows this one's writer remembers.
        batches.written.forgetAll()
        try await cancelWhenGracefulShutdown {
            await runTogether(projections)
        }
        if !Task.isCancelled { try? await gracefulShutdown() }
    }

    /// Follows the log for the versions of `projections` that are live, together (one read of
    /// each batch, one fold of each touched user, one transaction for all their rows and
    /// checkpoints), and for each other version that is followed (one being built, or one that
    /// failed before and is tried again) on its own, until cancelled.
    ///
    /// A batch that fails together with an error that is not transient is not charged to any of
    /// them: from then on each live version follows on its own (`runProjection`), so that only the
    /// one at fault stops, with its reason, and the others keep going.
    func runTogether(_ projections: [any UserProjection.Type]) async {
        var logger = logger
        logger[metadataKey: "ledger.projection"] = "live versions"
        let metrics = Dictionary(uniqueKeysWithValues: projections.map { ($0.tableName, ProjectionMetrics($0, database: metricsDatabase)) })
        // Versions being built that went live, to be followed together from then on.
        let joins = Joins()
        await withTaskGroup(of: Void.self) { group in
            // Versions not followed together: each on its own task, or not at all (retired).
            var apart = Set<String>()
            // Versions not followed at all (failed or retired), or handed to their own task for good.
            var given = Set<String>()
            var delay = Self.firstRetryDelay
            let attempts = Attempts(pool: client)
            var members: [Member] = []
            while !Task.isCancelled {
                attempts.begin()
                do {
                    // Run apart, as the batches are (see `runProjection`): a statement left waiting
                    // on a connection PostgreSQL dropped must not hold the runner, nor its shutdown.
                    let registered = try await untilAbandoned({ [self, apart, logger] in
                        try await register(projections.filter { !apart.contains($0.tableName) }, attempts: attempts, logger: logger)
                    }, abandonWhen: {
                        await attempts.waitUntilStranded()
                    })
                    members = []
                    for (projection, checkpoint, state) in registered.map({ ($0.projection, $0.checkpoint, $0.state) }) {
                        switch state {
                        case .live:
                            members.append(Member(projection: projection, checkpoint: checkpoint))
                        case .building:
                            apart.insert(projection.tableName)
                            group.addTask { await runProjection(projection) { await joins.add(projection.tableName) } }
                        case .failed, .retired:
                            apart.insert(projection.tableName)
                            given.insert(projection.tableName)
                            logger.warning("projection version not followed", metadata: [
                                "ledger.projection": "\(projection.tableName)", "ledger.status": "\(state)",
                                "ledger.hint": "see `ledger projections status`",
                            ])
                            metrics[projection.tableName]?.recordFailed(state == .failed)
                        }
                    }
                    let building = projections.filter { apart.contains($0.tableName) && !given.contains($0.tableName) }.count
                    guard !members.isEmpty || building > 0 else { break }
                    // Until a version being built goes live and joins: then this attempt ends (a batch
                    // in flight rolls back) and the next one follows it too.
                    let newcomer = try await withThrowingTaskGroup(of: String?.self) { attempt in
                        if !members.isEmpty {
                            attempt.addTask { [members, logger] in
                                try await untilAbandoned { [members, logger] in
                                    try await followTogether(members, attempts: attempts, metrics: metrics, logger: logger)
                                } abandonWhen: {
                                    await attempts.waitUntilStranded()
                                }
                                return nil
                            }
                        }
                        attempt.addTask { await joins.next() }
                        defer { attempt.cancelAll() }
                        return try await attempt.next() ?? nil
                    }
                    guard let newcomer else { break }
                    apart.remove(newcomer)
                    logger.info("projection version live: followed together with the others from now on", metadata: ["ledger.version": "\(newcomer)"])
                    continue
                } catch where Task.isCancelled || error is CancellationError {
                    break
                } catch {
                    if let failure = ProjectionFailure.judging(error, batch: attempts.batch) {
                        logger.warning("a batch of the live projections failed; each follows on its own now, so that only the one at fault stops", metadata: [
                            "ledger.error": "\(failure.message)", "ledger.position": "\(failure.position.map(String.init) ?? "-")",
                        ])
                        for member in members where apart.insert(member.projection.tableName).inserted {
                            given.insert(member.projection.tableName)
                            group.addTask { await runProjection(member.projection) }
                        }
                        break
                    }
                    await Self.pause(after: error, delay: &delay, progressed: attempts.progressed,
                                     "projections interrupted, retrying from their checkpoints", logger: logger)
                }
            }
            await group.waitForAll()
        }
    }

    /// A version being built went live (`runProjection`'s hand-over).
    struct WentLive: Error {}

    /// Versions being built that went live and wait to be followed together, in the order they did.
    final class Joins: Sendable {
        private let names = Mutex<[String]>([])
        private let wakeUp = WakeUp()

        func add(_ name: String) async {
            names.withLock { $0.append(name) }
            await wakeUp.signal()
        }

        /// The next version to join, once there is one; nil when cancelled.
        func next() async -> String? {
            while !Task.isCancelled {
                if let name = names.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return name }
                await wakeUp.wait(atMost: .seconds(1))
            }
            return nil
        }
    }

    /// A live version followed together with the others, from its checkpoint.
    struct Member: Sendable {
        let projection: any UserProjection.Type
        let checkpoint: Int64
    }

    /// A version's checkpoint and state, as registered.
    struct Registered: Sendable {
        let projection: any UserProjection.Type
        let checkpoint: Int64
        let state: ProjectionState
    }

    /// Registers each version (after trying again, once per run, those that failed before).
    private func register(_ projections: [any UserProjection.Type], attempts: Attempts, logger: Logger) async throws -> [Registered] {
        if !attempts.retriedEarlierFailure {
            for projection in projections { try await retryEarlierFailure(of: projection, logger: logger) }
            attempts.retriedEarlierFailure = true
        }
        var registered: [Registered] = []
        for projection in projections {
            let (checkpoint, state) = try await register(projection)
            registered.append(Registered(projection: projection, checkpoint: checkpoint, state: state))
        }
        return registered
    }

    /// One attempt at following the log for the live versions together, each from its checkpoint
    /// (the read starts at the earliest; a version further on skips what it has applied).
    private func followTogether(
        _ members: [Member], attempts: Attempts, metrics: [String: ProjectionMetrics], logger: Logger
    ) async throws {
        var checkpoints = members.map(\.checkpoint)
        let head = try await store.headPosition()
        for member in members {
            metrics[member.projection.tableName]?.recordFailed(false)
            metrics[member.projection.tableName]?.record(position: member.checkpoint, head: head)
        }
        attempts.beat()
        let follower = LogFollower(
            store: store, listenConfiguration: listenConfiguration, pollInterval: pollInterval,
            batchSize: batchSize, logger: logger
        )
        try await follower.follow(after: checkpoints.min() ?? 0, whenCaughtUp: { reached in
            // Everything visible is applied: no lag.
            for member in members { metrics[member.projection.tableName]?.record(position: reached, head: reached) }
            attempts.beat()
        }) { events in
            guard let first = events.first?.position, let last = events.last?.position else { return }
            attempts.batch = first...last
            var writes: [ProjectionBatchWriter.TableWrite] = []
            for (member, checkpoint) in zip(members, checkpoints) where checkpoint < last {
                let unapplied = checkpoint < first ? events : events.filter { $0.position > checkpoint }
                writes.append(.init(projection: member.projection, rows: try await batches.rows(for: unapplied, member.projection, upTo: last), from: checkpoint))
            }
            try await batches.write(together: writes, upTo: last)
            checkpoints = checkpoints.map { max($0, last) }
            attempts.batch = nil
            attempts.beat(progressed: true)
            if events.count == batchSize {
                // Catching up: one cheap max(position) per full batch measures the distance.
                let head = try await store.headPosition()
                for member in members { metrics[member.projection.tableName]?.record(position: last, head: head) }
            }
        }
    }

    /// The pause after the first transient error; it doubles after each further one, up to
    /// `longestRetryDelay`, and starts again after a batch goes through. Short, because a database
    /// that comes back must be followed again within seconds.
    static let firstRetryDelay = Duration.milliseconds(250)
    static let longestRetryDelay = Duration.seconds(2)

    /// Logs a transient error and waits `delay` before the next attempt (from the first delay
    /// again when the attempt had applied something), doubling it for the one after.
    static func pause(after error: any Error, delay: inout Duration, progressed: Bool, _ message: Logger.Message, logger: Logger) async {
        if progressed { delay = firstRetryDelay }
        logger.warning(message, metadata: ["ledger.error": "\(String(reflecting: error))", "ledger.retry_in": "\(delay)"])
        try? await Task.sleep(for: delay)
        delay = min(delay * 2, longestRetryDelay)
    }

    /// The pauses before each retry, for `failures` transient errors in a row.
    static func retryDelays(_ failures: Int) -> [Duration] {
        var delays: [Duration] = []
        var delay = firstRetryDelay
        for _ in 0..<failures {
            delays.append(delay)
            delay = min(delay * 2, longestRetryDelay)
        }
        return delays
    }

    /// Follows the log for one projection until cancelled. A deterministic error (an event it
    /// cannot read, a fold that fails, rows the database refuses) stops it for good, recorded with
    /// the position (`ProjectionFailure.judging` says which errors are); a transient one, such as a
    /// lost database connection, is retried from the last checkpoint after a short pause. A version
    /// that failed before is tried once more when the runner starts: the cause may have been fixed.
    ///
    /// With `joinWhenLive`, a version being built stops following on its own once it has switched
    /// over, and `joinWhenLive` is called: the live versions then follow it together with them.
    func runProjection(_ projection: any UserProjection.Type, joinWhenLive: (@Sendable () async -> Void)? = nil) async {
        var logger = logger
        logger[metadataKey: "ledger.projection"] = "\(projection.tableName)"
        let metrics = ProjectionMetrics(projection, database: metricsDatabase)
        var delay = Self.firstRetryDelay
        let attempts = Attempts(pool: client)
        while !Task.isCancelled {
            attempts.begin()
            do {
                // Run apart, so that an attempt left waiting on a connection PostgreSQL dropped
                // (see `untilAbandoned`) is given up once the pool has been renewed for a while
                // and it has not moved since: the next attempt starts from the checkpoint.
                try await untilAbandoned { [logger] in
                    try await follow(projection, attempts: attempts, metrics: metrics, handOverWhenLive: joinWhenLive != nil, logger: logger)
                } abandonWhen: {
                    await attempts.waitUntilStranded()
                }
                return
            } catch is WentLive {
                await joinWhenLive?()
                return
            } catch where Task.isCancelled || error is CancellationError {
                // Shutting down mid-batch: the batch's transaction did not commit; nothing failed.
                return
            } catch {
                if let failure = ProjectionFailure.judging(error, batch: attempts.batch) {
                    logger.error("projection stopped", metadata: [
                        "ledger.error": "\(failure.message)", "ledger.position": "\(failure.position.map(String.init) ?? "-")",
                    ])
                    metrics.recordFailed(true)
                    await markFailed(projection, failure, logger: logger)
                    return
                }
                await Self.pause(after: error, delay: &delay, progressed: attempts.progressed,
                                 "projection interrupted, retrying from its checkpoint", logger: logger)
            }
        }
    }

    /// One attempt at following the log for `projection`, from its checkpoint.
    private func follow(
        _ projection: any UserProjection.Type, attempts: Attempts, metrics: ProjectionMetrics, handOverWhenLive: Bool = false, logger: Logger
    ) async throws {
        if !attempts.retriedEarlierFailure {
            try await retryEarlierFailure(of: projection, logger: logger)
            attempts.retriedEarlierFailure = true
        }
        let (checkpoint, state) = try await register(projection)
        guard state == .live || state == .building else {
            logger.warning("projection version not followed", metadata: [
                "ledger.status": "\(state)", "ledger.hint": "see `ledger projections status`",
            ])
            metrics.recordFailed(state == .failed)
            return
        }
        metrics.recordFailed(false)
        metrics.record(position: checkpoint, head: try await store.headPosition())
        attempts.beat()
        let follower = LogFollower(
            store: store, listenConfiguration: listenConfiguration, pollInterval: pollInterval,
            batchSize: batchSize, logger: logger
        )
        var position = checkpoint
        var live = state == .live
        try await follower.follow(after: checkpoint, whenCaughtUp: { reached in
            // Everything visible is applied: no lag, and a building version can take over.
            metrics.record(position: reached, head: reached)
            if !live {
                live = try await switchOverIfCaughtUp(projection)
                // Live now: followed from here with the other live versions.
                if live && handOverWhenLive { throw WentLive() }
            }
            attempts.beat()
        }) { events in
            attempts.batch = events.first.map { $0.position...(events.last?.position ?? $0.position) }
            let last = try await apply(events, to: projection, after: position)
            attempts.batch = nil
            position = last
            attempts.beat(progressed: true)
            if events.count == batchSize {
                // Catching up: one cheap max(position) per full batch measures the distance.
                metrics.record(position: last, head: try await store.headPosition())
            }
        }
    }

    // MARK: Registration

    /// Sets up every projection's table and view without following the log, so that a server
    /// started on a new database answers reads from its first request instead of finding no
    /// view. Safe to call again, and from several processes at once.
    public func prepare() async throws {
        for projection in projections { _ = try await register(projection) }
    }

    /// Creates the version's table the first time; returns its checkpoint and state.
    ///
    /// A new version is live at once only when no version of the projection is live and the log
    /// is empty (a new database: its empty tables are the truth). Otherwise it is building until it
    /// has caught up, and readers are answered 503 `projections_behind` meanwhile rather than from
    /// a table that does not hold the log's events yet.
    func register(_ projection: any UserProjection.Type) async throws -> (position: Int64, state: ProjectionState) {
        try await ProjectionTables.withRegistryLocked(client, logger: logger) { connection in
            let existing = try await connection.query(
                "SELECT position, status FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
                logger: logger
            ).collect()
            if let row = existing.first {
                let (position, status) = try row.decode((Int64, String).self)
                guard let state = ProjectionState(rawValue: status) else {
                    throw StoreError.integrity("ledger.projections holds status '\(status)', which this version does not know")
                }
                return (position, state)
            }
            let answered = try await connection.query(
                """
                SELECT EXISTS (SELECT 1 FROM ledger.projections WHERE name = \(projection.name) AND status = \(ProjectionState.live)),
                       EXISTS (SELECT 1 FROM ledger.events)
                """,
                logger: logger
            ).collect()
            let (anotherLive, logHasEvents) = try answered.first?.decode((Bool, Bool).self) ?? (false, false)
            let status: ProjectionState = anotherLive || logHasEvents ? .building : .live
            _ = try await connection.query(ProjectionTables.createTable(projection, named: projection.tableName, replacing: false), logger: logger).collect()
            for index in ProjectionTables.createIndexes(projection, on: projection.tableName, named: true) {
                _ = try await connection.query(index, logger: logger).collect()
            }
            try await ProjectionTables.commentColumns(projection, on: connection, logger: logger)
            try await connection.query(
                "INSERT INTO ledger.projections (name, version, status) VALUES (\(projection.name), \(projection.version), \(status))",
                logger: logger
            )
            if status == .live {
                try await ProjectionTables.pointView(of: projection, on: connection, logger: logger)
            }
            return (0, status)
        }
    }

    /// A version that failed is set to building again, once per run of the runner: a restart is
    /// how an operator says the cause is fixed (a constraint dropped, the database repaired). If
    /// it was not, the same batch fails again and the version is failed again, with the reason.
    private func retryEarlierFailure(of projection: any UserProjection.Type, logger: Logger) async throws {
        let rows = try await client.query(
            """
            WITH failed AS (
                SELECT name, version, error, error_position FROM ledger.projections
                WHERE name = \(projection.name) AND version = \(projection.version) AND status = \(ProjectionState.failed)
                FOR UPDATE
            )
            UPDATE ledger.projections p SET status = \(ProjectionState.building), error = NULL, error_position = NULL, updated_at = now()
            FROM failed WHERE p.name = failed.name AND p.version = failed.version
            RETURNING failed.error, failed.error_position
            """,
            logger: logger
        ).collect()
        for row in rows {
            let (error, position) = try row.decode((String?, Int64?).self)
            logger.notice("projection failed earlier; trying it again", metadata: [
                "ledger.error": "\(error ?? "-")", "ledger.position": "\(position.map(String.init) ?? "-")",
            ])
        }
    }

    // MARK: Applying a batch

    /// Applies one batch to the projection's own table and moves its checkpoint; returns the
    /// batch's last position.
    func apply(_ events: [RecordedEvent], to projection: any UserProjection.Type, after checkpoint: Int64) async throws -> Int64 {
        guard let last = events.last?.position else { return checkpoint }
        let rows = try await batches.rows(for: events, projection, upTo: last)
        try await batches.write(rows, to: projection, table: projection.tableName, checkpoint: (checkpoint, last))
        return last
    }

    /// Brings a live version forward from `position` to at least `target`, a committed position,
    /// with checkpoints. A read the followers' horizon holds back is tried again after a pause.
    func catchUpLive(_ projection: any UserProjection.Type, from position: Int64, to target: Int64) async throws {
        var position = position
        while position < target {
            let events = try await store.readAll(after: position, stream: nil, limit: batchSize)
            if events.isEmpty {
                try await Task.sleep(for: pollInterval)
                continue
            }
            position = try await apply(events, to: projection, after: position)
        }
    }

    // MARK: Status

    /// Makes a building version live once it has caught up, retiring the live one (and older
    /// versions still building or failed: the code has moved past them). Its rows and its
    /// checkpoint must not be behind the version it replaces, or a reader who was answered at the
    /// old checkpoint would next be answered below it: if the old version is further on (a runner
    /// of older code still follows it), the switch waits for a later batch. A version never
    /// replaces a newer live one. Returns whether the version is live now.
    private func switchOverIfCaughtUp(_ projection: any UserProjection.Type) async throws -> Bool {
        try await ProjectionTables.withRegistryLocked(client, logger: logger) { connection in
            // The rows first, as every writer locks them (see `ProjectionTables.withRegistryLocked`).
            let versions = try await connection.query(
                """
                SELECT version, status, position FROM ledger.projections
                WHERE name = \(projection.name) AND status = ANY(\([ProjectionState.live, .building, .failed].map(\.rawValue))) FOR UPDATE
                """,
                logger: logger
            ).collect().map { row in
                let (version, status, position) = try row.decode((Int, String, Int64).self)
                return (version: version, state: ProjectionState(rawValue: status), position: position)
            }
            guard let mine = versions.first(where: { $0.version == projection.version }) else { return false }
            guard mine.state == .building else { return mine.state == .live }
            let live = versions.filter { $0.state == .live }
            guard live.allSatisfy({ $0.version < mine.version && $0.position <= mine.position }) else { return false }
            let replaced = versions.filter { $0.state == .live || $0.version < mine.version }
            for version in replaced.map(\.version) {
                try await connection.query(
                    "UPDATE ledger.projections SET status = \(ProjectionState.retired), updated_at = now() WHERE name = \(projection.name) AND version = \(version)",
                    logger: logger
                )
            }
            try await ProjectionTables.pointView(of: projection, on: connection, logger: logger)
            try await connection.query(
                "UPDATE ledger.projections SET status = \(ProjectionState.live), updated_at = now() WHERE name = \(projection.name) AND version = \(projection.version)",
                logger: logger
            )
            for version in replaced.map(\.version) {
                _ = try await connection.query(ProjectionTables.dropTable("\(projection.name.rawValue)_v\(version)"), logger: logger).collect()
            }
            logger.info("projection version live", metadata: ["ledger.position": "\(mine.position)"])
            return true
        }
    }

    /// Records the failure, unless the version was retired or rebuilt meanwhile. Retried until it
    /// is recorded (or the runner stops): a failure nobody can see would only show as a stall.
    private func markFailed(_ projection: any UserProjection.Type, _ failure: ProjectionFailure, logger: Logger) async {
        var delay = Self.firstRetryDelay
        while !Task.isCancelled {
            do {
                try await client.query(
                    """
                    UPDATE ledger.projections SET status = \(ProjectionState.failed), error = \(failure.message),
                        error_position = \(failure.position), updated_at = now()
                    WHERE name = \(projection.name) AND version = \(projection.version)
                      AND status = ANY(\([ProjectionState.live, .building].map(\.rawValue)))
                    """,
                    logger: logger
                )
                return
            } catch {
                logger.warning("projection failure not recorded yet, retrying", metadata: [
                    "ledger.error": "\(String(reflecting: error))", "ledger.retry_in": "\(delay)",
                ])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, Self.longestRetryDelay)
            }
        }
    }
}

/// What one projection's attempts share with the loop that starts them: the batch in flight (for
/// a failure's record), whether anything was applied, and when the attempt last moved, by the
/// pool's renewals (`DatabasePool.renew`).
final class Attempts: Sendable {
    /// How long after a renewal of the pool an attempt that has not moved since is given up.
    static let strandedAfter = Duration.seconds(2)

    private struct State {
        var batch: ClosedRange<Int64>?
        var progressed = false
        var retriedEarlierFailure = false
        var beatAtRenewal = 0
    }

    private let pool: DatabasePool
    private let state = Mutex(State())

    init(pool: DatabasePool) {
        self.pool = pool
    }

    var batch: ClosedRange<Int64>? {
        get { state.withLock { $0.batch } }
        set { state.withLock { $0.batch = newValue } }
    }

    var progressed: Bool { state.withLock { $0.progressed } }

    var retriedEarlierFailure: Bool {
        get { state.withLock { $0.retriedEarlierFailure } }
        set { state.withLock { $0.retriedEarlierFailure = newValue } }
    }

    func begin() {
        let renewals = pool.renewal.count
        state.withLock {
            $0.batch = nil
            $0.progressed = false
            $0.beatAtRenewal = renewals
        }
    }

    /// The attempt is moving (a batch applied, or the log read to its end).
    func beat(progressed: Bool = false) {
        let renewals = pool.renewal.count
        state.withLock {
            $0.beatAtRenewal = renewals
            if progressed { $0.progressed = true }
        }
    }

    /// Returns an error once the pool has been renewed and `strandedAfter` has passed without the
    /// attempt moving; nil when cancelled.
    func waitUntilStranded() async -> (any Error)? {
        while !Task.isCancelled {
            let renewal = pool.renewal
            let beat = state.withLock { $0.beatAtRenewal }
            if renewal.count > beat, let at = renewal.at, at.duration(to: .now) > Self.strandedAfter {
                return StoreError.databaseUnavailable(
                    "the attempt waited on a connection lost in an outage; the connection pool was renewed \(at.duration(to: .now)) ago"
                )
            }
            try? await Task.sleep(for: .milliseconds(500))
        }
        return nil
    }
}
