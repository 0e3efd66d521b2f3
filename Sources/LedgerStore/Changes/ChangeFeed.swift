import LedgerApplication
import LedgerProjections
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Listens on `ledger_changes` (see migration 0012) and keeps what this server holds in memory
/// true to the database: the API keys it accepted (`AcceptedKeys`) and the projection registry
/// (`ProjectionBoard`), and the entitlement rows it read (`EntitlementRowCache`), which it brings
/// up to the projections' checkpoint each time that moves; and it passes the change feed's
/// progress on to the long polls waiting for it (`FeedSignal`).
///
/// On its own connection it LISTENs first, then loads the registry and the keys' generation, so
/// no change falls between the two. Once a second it asks for the keys' generation on the same
/// connection: an answer that does not come within a second, or a closed connection, means
/// announcements may be lost, so the keys are forgotten and the board goes blank (readers ask
/// the database) until it listens again.
public struct ChangeFeed: Service {
    public static let channel = "ledger_changes"

    public let keys: AcceptedKeys
    public let projections: ProjectionBoard
    /// nil when the server keeps no entitlement rows (`serve --entitlement-cache-users 0`).
    public let entitlements: EntitlementRowCache?
    /// How far the change feed's writer has written, for the feed's long polls.
    public let feed: FeedSignal
    let configuration: PostgresConnection.Configuration
    let heartbeat: Duration
    let logger: Logger

    public init(
        configuration: PostgresConnection.Configuration, keys: AcceptedKeys = AcceptedKeys(), projections: ProjectionBoard = ProjectionBoard(),
        entitlements: EntitlementRowCache? = EntitlementRowCache(), feed: FeedSignal = FeedSignal(), heartbeat: Duration = .seconds(1),
        logger: Logger
    ) {
        self.feed = feed
        self.configuration = configuration
        self.keys = keys
        self.projections = projections
        self.entitlements = entitlements
        self.heartbeat = heartbeat
        self.logger = logger
    }

    public func run() async throws {
        var connectionID = 0
        let deafSince = DeafSince()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(configuration, id: connectionID, logger: logger)
                defer { Task { try? await connection.close() } }
                try await cancelWhenGracefulShutdown {
                    try await listen(on: connection) {
                        if let since = deafSince.heard() {
                            logger.info("listening for changes again: API keys and projection positions are kept in memory", metadata: [
                                "ledger.deaf_for": "\(since.duration(to: .now))",
                            ])
                        }
                    }
                }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                if deafSince.deaf() {
                    logger.warning("not listening for changes: API keys and projection positions are read from the database until it listens again",
                                   metadata: ["ledger.error": "\(String(reflecting: error))"])
                }
            }
            forget()
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(250)) }
        }
        forget()
    }

    private func forget() {
        keys.deaf()
        projections.deaf()
        entitlements?.disable()
    }

    /// Listens until the connection fails, a heartbeat goes unanswered, or the task is cancelled.
    private func listen(on connection: PostgresConnection, listening: @escaping @Sendable () -> Void) async throws {
        try await connection.listen(on: Self.channel) { notifications in
            // LISTEN holds from here: what is loaded now plus what is announced next is the whole truth.
            let generation = try await generation(on: connection)
            let rows = try await registry(on: connection)
            projections.load(rows)
            keys.listening(generation: generation)
            listening()
            // Wakes the cache's follower after every change of the registry; changes that come
            // while it works are taken together.
            let (moves, moved) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            moved.yield()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { moved.finish() }
                    for try await notification in notifications {
                        if try apply(notification.payload) { moved.yield() }
                    }
                    throw ChangeFeedError("the notifications ended")
                }
                if let entitlements {
                    group.addTask { try await follow(moves, keeping: entitlements, on: connection) }
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: heartbeat)
                        let generation = try await untilAbandoned(after: heartbeat) { try await self.generation(on: connection) }
                        keys.listening(generation: generation)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// Applies one announcement; throws for one it cannot read (the feed then starts over).
    /// Returns whether the projection registry changed.
    private func apply(_ payload: String) throws -> Bool {
        let fields = payload.split(separator: " ")
        switch fields.first {
        case "api_keys":
            guard fields.count == 2, let generation = Int64(fields[1]) else { throw ChangeFeedError("unreadable announcement '\(payload)'") }
            keys.revoked(generation: generation)
            logger.debug("an API key was revoked: accepted keys forgotten", metadata: ["ledger.generation": "\(generation)"])
            return false
        case "projection":
            guard let row = RegistryRow(announced: Array(fields.dropFirst())) else { throw ChangeFeedError("unreadable announcement '\(payload)'") }
            projections.apply(row)
            return true
        case "projection_removed":
            guard fields.count == 3, let version = Int(fields[2]) else { throw ChangeFeedError("unreadable announcement '\(payload)'") }
            projections.remove(name: String(fields[1]), version: version)
            return true
        case "feed":
            guard fields.count == 2, let position = Int64(fields[1]) else { throw ChangeFeedError("unreadable announcement '\(payload)'") }
            feed.written(through: position)
            return false
        case "projections_reset":
            throw ChangeFeedError("the projection registry was emptied; loading it again")
        default:
            throw ChangeFeedError("unknown announcement '\(payload)'")
        }
    }

    /// Brings the entitlement cache up to the projections each time the registry changes.
    private func follow(_ moves: AsyncStream<Void>, keeping cache: EntitlementRowCache, on connection: PostgresConnection) async throws {
        for await _ in moves {
            try await cache.follow(projections) { after, through in
                try await movedStreams(after: after, through: through, on: connection)
            }
        }
    }

    /// The streams with events in `(after, through]`: whose entitlement rows may have changed.
    private func movedStreams(after: Int64, through: Int64, on connection: PostgresConnection) async throws -> [String] {
        let rows = try await connection.unlessClosed(during: "reading which streams moved") {
            try await connection.allRows(
                "SELECT DISTINCT stream_id FROM ledger.events WHERE position > \(after) AND position <= \(through)", logger: logger
            )
        }
        return try rows.map { try $0.decode(String.self) }
    }

    private func generation(on connection: PostgresConnection) async throws -> Int64 {
        let rows = try await connection.unlessClosed(during: "reading the API keys' generation") {
            try await connection.allRows("SELECT last_value, is_called FROM ledger.api_key_generation", logger: logger)
        }
        guard let (value, called) = try rows.first?.decode((Int64, Bool).self) else { return 0 }
        return called ? value : 0
    }

    private func registry(on connection: PostgresConnection) async throws -> [RegistryRow] {
        let rows = try await connection.unlessClosed(during: "loading the projection registry") {
            try await connection.allRows(
                "SELECT name, version, status, position, error_position, change FROM ledger.projections", logger: logger
            )
        }
        return try rows.map { row in
            let (name, version, status, position, errorPosition, change) = try row.decode((String, Int, String, Int64, Int64?, Int64).self)
            return RegistryRow(name: ProjectionName(rawValue: name), version: version, state: ProjectionState(rawValue: status),
                               position: position, errorPosition: errorPosition, change: change)
        }
    }
}

/// Since when the feed has not been listening, for its log lines.
private final class DeafSince: Sendable {
    private let since = Mutex<ContinuousClock.Instant?>(nil)

    /// Marks the feed deaf; true when it was listening until now.
    func deaf() -> Bool {
        since.withLock { since in
            guard since == nil else { return false }
            since = .now
            return true
        }
    }

    /// Marks it listening; returns since when it was deaf, if it was.
    func heard() -> ContinuousClock.Instant? {
        since.withLock { since in
            defer { since = nil }
            return since
        }
    }
}

struct ChangeFeedError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
