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
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext('ledger.projections'))", logger: logger)
                let existing = try await connection.query(
                    "SELECT position, status FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
                    logger: logger
                ).collect()
                if let row = existing.first {
                    let (position, status) = try row.decode((Int64, String).self)
                    return status == "failed" || status == "retired" ? nil : position
                }
                let live = try await connection.query(
                    "SELECT 1 FROM ledger.projections WHERE name = \(projection.name) AND status = 'live'", logger: logger
                ).collect()
                let status = live.isEmpty ? "live" : "building"
                // Names and types come from the compiled-in projection definitions, never from input.
                try await connection.query(
                    "CREATE TABLE IF NOT EXISTS ledger.\(unescaped: projection.tableName) (\(unescaped: Self.columnDefinitions(projection)))",
                    logger: logger
                )
                try await connection.query(
                    "CREATE INDEX IF NOT EXISTS \(unescaped: projection.tableName)_user ON ledger.\(unescaped: projection.tableName) (app, user_id)",
                    logger: logger
                )
                for columns in projection.indexes {
                    try await connection.query(
                        "CREATE INDEX IF NOT EXISTS \(unescaped: projection.tableName)_\(unescaped: columns.joined(separator: "_")) ON ledger.\(unescaped: projection.tableName) (\(unescaped: columns.joined(separator: ", ")))",
                        logger: logger
                    )
                }
                try await Self.commentColumns(projection, on: connection, logger: logger)
                try await connection.query(
                    "INSERT INTO ledger.projections (name, version, status) VALUES (\(projection.name), \(projection.version), \(status))",
                    logger: logger
                )
                if status == "live" {
                    try await Self.pointView(of: projection, on: connection, logger: logger)
                }
                return 0
            }
        }
    }

    // MARK: Applying a batch

    /// Applies one batch to the projection's own table and moves its checkpoint; returns the
    /// batch's last position.
    func apply(_ events: [RecordedEvent], to projection: any UserProjection.Type, after checkpoint: Int64) async throws -> Int64 {
        guard let last = events.last?.position else { return checkpoint }
        let rows = try await rows(for: events, projection, upTo: last)
        try await write(rows, to: projection, table: projection.tableName, checkpoint: (checkpoint, last))
        return last
    }

    /// Applies events to any table of the projection's shape, without a checkpoint (rebuilds).
    func applyRows(_ events: [RecordedEvent], to projection: any UserProjection.Type, table: String) async throws {
        guard let last = events.last?.position else { return }
        try await write(try await rows(for: events, projection, upTo: last), to: projection, table: table, checkpoint: nil)
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

    /// The rows of every user the batch touched, folded up to `last`. A catalog change touches
    /// every user of its app, so classifications and durations follow the catalog everywhere.
    private func rows(for events: [RecordedEvent], _ projection: any UserProjection.Type, upTo last: Int64) async throws -> [(UserKey, [[String?]])] {
        var users: [UserKey] = []
        var seen = Set<UserKey>()
        for event in events {
            if event.streamID.hasPrefix("catalog/") {
                let app = String(event.streamID.dropFirst("catalog/".count))
                for user in try await self.users(of: app, upTo: last) where seen.insert(user).inserted { users.append(user) }
                continue
            }
            guard let user = UserKey(streamID: event.streamID) else { continue }
            // Every user event must be one this code understands: stop rather than skip.
            do {
                _ = try UserEvent(type: event.type, data: event.data)
            } catch {
                throw ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
            }
            if seen.insert(user).inserted { users.append(user) }
        }
        var rows: [(UserKey, [[String?]])] = []
        var catalogs: [String: ProductCatalog] = [:]
        let handler = UserCommandHandler(store: store, logger: logger)
        for user in users {
            let catalog: ProductCatalog
            if let known = catalogs[user.app] {
                catalog = known
            } else {
                catalog = try await handler.loadCatalog(app: user.app, upToPosition: last)
                catalogs[user.app] = catalog
            }
            let state: UserLedger
            do {
                state = try await handler.state(app: user.app, user: user.user, upToPosition: last)
            } catch let error as UnknownEventType {
                throw ProjectionFailure(message: "cannot fold user \(user.app)/\(user.user): \(error)", position: last)
            } catch let error as DecodingError {
                throw ProjectionFailure(message: "cannot fold user \(user.app)/\(user.user): \(error)", position: last)
            }
            rows.append((user, projection.rows(app: user.app, user: user.user, state: state.classified(by: catalog), catalog: catalog)))
        }
        return rows
    }

    /// Every user of an app with an event at or before `position`.
    private func users(of app: String, upTo position: Int64) async throws -> [UserKey] {
        let rows = try await client.query(
            """
            SELECT DISTINCT stream_id FROM ledger.events
            WHERE starts_with(stream_id, \("user/\(app)/")) AND "position" <= \(position)
            """,
            logger: logger
        )
        var users: [UserKey] = []
        for try await stream in rows.decode(String.self) {
            if let user = UserKey(streamID: stream) { users.append(user) }
        }
        return users
    }

    private func write(
        _ rows: [(UserKey, [[String?]])], to projection: any UserProjection.Type, table name: String,
        checkpoint: (from: Int64, to: Int64)?
    ) async throws {
        let table = "ledger.\(name)"
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                if !rows.isEmpty {
                    try await connection.query(
                        """
                        DELETE FROM \(unescaped: table) t USING unnest(\(rows.map(\.0.app)), \(rows.map(\.0.user))) AS u(app, user_id)
                        WHERE t.app = u.app AND t.user_id = u.user_id
                        """,
                        logger: logger
                    )
                    let lines = rows.flatMap { user, userRows in
                        userRows.map { CopyText.line([user.app, user.user] + $0) }
                    }
                    if !lines.isEmpty {
                        // copyFrom quotes the table name as one identifier, so no schema prefix:
                        // the schema comes from search_path, for this transaction only.
                        try await connection.query("SET LOCAL search_path = ledger", logger: logger)
                        try await connection.copyFrom(
                            table: name, columns: ["app", "user_id"] + projection.columns.map(\.name), logger: logger
                        ) { writer in
                            var buffer = ByteBuffer()
                            for line in lines {
                                buffer.writeString(line)
                                if buffer.readableBytes > 1 << 16 {
                                    try await writer.write(buffer)
                                    buffer.clear()
                                }
                            }
                            if buffer.readableBytes > 0 { try await writer.write(buffer) }
                        }
                    }
                }
                // Only from the checkpoint this runner read: a second runner cannot apply twice.
                guard let checkpoint else { return }
                let moved = try await connection.query(
                    """
                    UPDATE ledger.projections SET position = \(checkpoint.to), updated_at = now()
                    WHERE name = \(projection.name) AND version = \(projection.version) AND position = \(checkpoint.from)
                    RETURNING 1
                    """,
                    logger: logger
                ).collect()
                guard !moved.isEmpty else {
                    // Another runner applied this batch first: roll back, re-read the checkpoint, go on.
                    throw CheckpointMoved(projection: projection.tableName)
                }
            }
        }
    }

    // MARK: Tables

    /// Points the projection's view (`ledger.<name>`, what readers query) at this version's table.
    /// Dropped and created rather than replaced: another version may add, remove or reorder
    /// columns, which CREATE OR REPLACE VIEW refuses. Run inside the switch's transaction.
    static func pointView(of projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("DROP VIEW IF EXISTS ledger.\(unescaped: projection.name)", logger: logger)
        try await connection.query(
            "CREATE VIEW ledger.\(unescaped: projection.name) AS SELECT * FROM ledger.\(unescaped: projection.tableName)",
            logger: logger
        )
    }

    /// `app`, `user_id` and the projection's columns, as SQL.
    static func columnDefinitions(_ projection: any UserProjection.Type) -> String {
        (["app text NOT NULL", "user_id text NOT NULL"] + projection.columns.map { "\($0.name) \($0.type)" }).joined(separator: ", ")
    }

    static func commentColumns(_ projection: any UserProjection.Type, on connection: PostgresConnection, logger: Logger) async throws {
        for column in projection.columns {
            try await connection.query(
                PostgresQuery(unsafeSQL: "COMMENT ON COLUMN ledger.\(projection.tableName).\(column.name) IS '\(column.meaning.replacingOccurrences(of: "'", with: "''"))'"),
                logger: logger
            )
        }
    }

    // MARK: Status

    private func switchOverIfCaughtUp(_ projection: any UserProjection.Type, at position: Int64) async throws {
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext('ledger.projections'))", logger: logger)
                let rows = try await connection.query(
                    "SELECT status FROM ledger.projections WHERE name = \(projection.name) AND version = \(projection.version)",
                    logger: logger
                ).collect()
                guard let status = try rows.first?.decode(String.self), status == "building" else { return }
                let retired = try await connection.query(
                    """
                    UPDATE ledger.projections SET status = 'retired', updated_at = now()
                    WHERE name = \(projection.name) AND status = 'live' RETURNING version
                    """,
                    logger: logger
                ).collect()
                try await Self.pointView(of: projection, on: connection, logger: logger)
                try await connection.query(
                    "UPDATE ledger.projections SET status = 'live', updated_at = now() WHERE name = \(projection.name) AND version = \(projection.version)",
                    logger: logger
                )
                for row in retired {
                    let version = try row.decode(Int.self)
                    try await connection.query(
                        "DROP TABLE IF EXISTS ledger.\(unescaped: projection.name)_v\(unescaped: String(version))", logger: logger
                    )
                }
                logger.info("projection version live", metadata: ["ledger.position": "\(position)"])
            }
        }
    }

    private func markFailed(_ projection: any UserProjection.Type, _ failure: ProjectionFailure) async throws {
        try await client.query(
            """
            UPDATE ledger.projections SET status = 'failed', error = \(failure.message), error_position = \(failure.position), updated_at = now()
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

/// The app and user of a `user/<bundle id>/<user id>` stream.
struct UserKey: Hashable, Sendable {
    let app: String
    let user: String

    init?(streamID: String) {
        guard streamID.hasPrefix("user/") else { return nil }
        let rest = streamID.dropFirst(5)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        app = String(rest[..<slash])
        user = String(rest[rest.index(after: slash)...])
        guard !app.isEmpty, !user.isEmpty else { return nil }
    }
}

/// PostgreSQL COPY text format.
enum CopyText {
    static func line(_ values: [String?]) -> String {
        values.map { value in
            guard let value else { return "\\N" }
            var escaped = ""
            for character in value.unicodeScalars {
                switch character {
                case "\\": escaped += "\\\\"
                case "\t": escaped += "\\t"
                case "\n": escaped += "\\n"
                case "\r": escaped += "\\r"
                default: escaped.unicodeScalars.append(character)
                }
            }
            return escaped
        }.joined(separator: "\t") + "\n"
    }
}
