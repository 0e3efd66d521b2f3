import Foundation
import LedgerDomain
import LedgerProjections
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// Keeps every projection's tables up to date with the log.
///
/// Each projection version follows the log on its own through the gap-safe follower. For a batch
/// of events it recomputes the rows of every user the batch touched (from the user's stream up to
/// the batch's last position) and replaces them, and moves its checkpoint, in one transaction: a
/// crash at any moment resumes to exactly the rows a rebuild gives. An event it cannot decode, or
/// a fold that fails, stops that projection with the reason and the position (see
/// `ledger.projections`); the others keep going. A new version builds beside the live one and
/// takes over, atomically, once it has caught up.
public struct ProjectionRunner: Service {
    let client: PostgresClient
    let store: PostgresEventStore
    let batches: ProjectionBatchWriter
    let listenConfiguration: PostgresConnection.Configuration?
    let projections: [any UserProjection.Type]
    let batchSize: Int
    let pollInterval: Duration
    /// The `database` label of this runner's gauges (several ledgers may report to one Prometheus).
    let metricsDatabase: String
    let logger: Logger

    public init(
        client: PostgresClient,
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
        self.batches = ProjectionBatchWriter(client: client, logger: logger)
        self.listenConfiguration = listenConfiguration
        self.projections = projections
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.logger = logger
    }

    /// Follows the log for every projection until cancelled or gracefully shut down. A batch in
    /// flight at shutdown rolls back and is applied again at the next start.
    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for projection in projections {
                    group.addTask { await runProjection(projection) }
                }
                try await group.waitForAll()
            }
        }
    }

    /// Follows the log for one projection until cancelled. An unreadable event or a failing fold
    /// stops it for good (recorded, with the position); anything else, such as a lost database
    /// connection, is retried with backoff from the last checkpoint.
    func runProjection(_ projection: any UserProjection.Type) async {
        var logger = logger
        logger[metadataKey: "ledger.projection"] = "\(projection.tableName)"
        let metrics = ProjectionMetrics(projection, database: metricsDatabase)
        var delay = Duration.milliseconds(250)
        while !Task.isCancelled {
            do {
                guard let checkpoint = try await register(projection) else {
                    logger.warning("projection stopped earlier; see `ledger projections status`")
                    return
                }
                metrics.record(position: checkpoint, head: try await store.headPosition())
                let follower = LogFollower(
                    store: store, listenConfiguration: listenConfiguration, pollInterval: pollInterval,
                    batchSize: batchSize, logger: logger
                )
                var position = checkpoint
                try await follower.follow(after: checkpoint) { events in
                    let last = try await apply(events, to: projection, after: position)
                    position = last
                    delay = .milliseconds(250)
                    if events.count < batchSize {
                        // A short batch means the follower has read everything visible: no lag.
                        metrics.record(position: last, head: last)
                        try await switchOverIfCaughtUp(projection, at: last)
                    } else {
                        // Catching up: one cheap max(position) per full batch measures the distance.
                        metrics.record(position: last, head: try await store.headPosition())
                    }
                }
                return
            } catch where Task.isCancelled || error is CancellationError {
                // Shutting down mid-batch: the batch's transaction did not commit; nothing failed.
                return
            } catch let failure as ProjectionFailure {
                logger.error("projection stopped", metadata: [
                    "ledger.error": "\(failure.message)", "ledger.position": "\(failure.position.map(String.init) ?? "-")",
                ])
                try? await markFailed(projection, failure)
                return
            } catch {
                logger.warning("projection interrupted, retrying from its checkpoint", metadata: [
                    "ledger.error": "\(String(reflecting: error))", "ledger.retry_in": "\(delay)",
                ])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(30))
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

    /// Creates the version's table the first time and returns its checkpoint, or nil when the
    /// version has failed (it waits for a fix and a new version, not for a restart).
    func register(_ projection: any UserProjection.Type) async throws -> Int64? {
        try await ProjectionTables.withRegistryLocked(client, logger: logger) { connection in
            let existing = try await connection.query(
                "SELECT position, status FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
                logger: logger
            ).collect()
            if let row = existing.first {
                let (position, status) = try row.decode((Int64, String).self)
                let state = ProjectionState(rawValue: status)
                return state == .failed || state == .retired ? nil : position
            }
            let live = try await connection.query(
                "SELECT 1 FROM ledger.projections WHERE name = \(projection.name) AND status = \(ProjectionState.live)", logger: logger
            ).collect()
            let status: ProjectionState = live.isEmpty ? .live : .building
            try await connection.query(ProjectionTables.createTable(projection, named: projection.tableName, replacing: false), logger: logger)
            for index in ProjectionTables.createIndexes(projection, on: projection.tableName, named: true) {
                try await connection.query(index, logger: logger)
            }
            try await ProjectionTables.commentColumns(projection, on: connection, logger: logger)
            try await connection.query(
                "INSERT INTO ledger.projections (name, version, status) VALUES (\(projection.name), \(projection.version), \(status))",
                logger: logger
            )
            if status == .live {
                try await ProjectionTables.pointView(of: projection, on: connection, logger: logger)
            }
            return 0
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

    /// Brings a live version forward from `position` to at least `target`, with checkpoints.
    func catchUpLive(_ projection: any UserProjection.Type, from position: Int64, to target: Int64) async throws {
        var position = position
        while position < target {
            let events = try await store.readAll(after: position, stream: nil, limit: batchSize)
            guard !events.isEmpty else { return }
            position = try await apply(events, to: projection, after: position)
        }
    }

    // MARK: Status

    private func switchOverIfCaughtUp(_ projection: any UserProjection.Type, at position: Int64) async throws {
        try await ProjectionTables.withRegistryLocked(client, logger: logger) { connection in
            let rows = try await connection.query(
                "SELECT status FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
                logger: logger
            ).collect()
            guard let status = try rows.first?.decode(String.self), ProjectionState(rawValue: status) == .building else { return }
            let retired = try await connection.query(
                """
                UPDATE ledger.projections SET status = \(ProjectionState.retired), updated_at = now()
                WHERE name = \(projection.name) AND status = \(ProjectionState.live) RETURNING version
                """,
                logger: logger
            ).collect()
            try await ProjectionTables.pointView(of: projection, on: connection, logger: logger)
            try await connection.query(
                "UPDATE ledger.projections SET status = \(ProjectionState.live), updated_at = now() WHERE name = \(projection.name) AND version = \(projection.version)",
                logger: logger
            )
            for row in retired {
                let version = try row.decode(Int.self)
                try await connection.query(ProjectionTables.dropTable("\(projection.name.rawValue)_v\(version)"), logger: logger)
            }
            logger.info("projection version live", metadata: ["ledger.position": "\(position)"])
        }
    }

    private func markFailed(_ projection: any UserProjection.Type, _ failure: ProjectionFailure) async throws {
        try await client.query(
            """
            UPDATE ledger.projections SET status = \(ProjectionState.failed), error = \(failure.message), error_position = \(failure.position), updated_at = now()
            WHERE name = \(projection.name) AND version = \(projection.version)
            """,
            logger: logger
        )
    }
}

/// Why a projection stopped, and at which position.
struct ProjectionFailure: Error, CustomStringConvertible {
    let message: String
    let position: Int64?
    var description: String { message }
}

/// Another runner moved the checkpoint; retried from the new one, not a failure.
struct CheckpointMoved: Error, CustomStringConvertible {
    let projection: String
    var description: String { "another runner moved the checkpoint of \(projection); continuing from its position" }
}
