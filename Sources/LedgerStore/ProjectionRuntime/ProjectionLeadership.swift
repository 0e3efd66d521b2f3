import Logging
import PostgresNIO
import ServiceLifecycle

/// Runs the projections in one `ledger serve` at a time among all those on the same database.
///
/// Every server asks PostgreSQL for one session-level advisory lock, on a connection of its own,
/// once a second. The one that holds it runs the `ProjectionRunner`; the others stand by and serve
/// requests from the tables the leader keeps up to date. PostgreSQL lets go of the lock when the
/// leader's session ends: a leader killed outright (its socket closes at once) is replaced within
/// about a second. Should the leader's own lock connection close while it is alive, it stops its
/// runner at once; a batch a new leader might apply at the same moment is still applied once,
/// since each batch moves its checkpoint only from where it found it.
public struct ProjectionLeadership: Service {
    let runner: ProjectionRunner
    let configuration: PostgresConnection.Configuration
    let retryInterval: Duration
    /// Work done by the leading server only, beside the projections (the walks of Apple's
    /// notification history): started when it leads, cancelled when it stops leading.
    let companions: [@Sendable () async -> Void]
    let logger: Logger

    /// The advisory lock's key (`pg_try_advisory_lock(bigint)`): "LEDGERPR" read as ASCII.
    static let lockKey: Int64 = 0x4C45_4447_4552_5052

    public init(
        runner: ProjectionRunner, configuration: PostgresConnection.Configuration, retryInterval: Duration = .seconds(1),
        companions: [@Sendable () async -> Void] = [], logger: Logger
    ) {
        self.runner = runner
        self.configuration = configuration
        self.retryInterval = retryInterval
        self.companions = companions
        self.logger = logger
    }

    public func run() async throws {
        var standingBy = false
        var connectionID = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(configuration, id: connectionID, logger: logger)
                defer { Task { try? await connection.close() } }
                while !Task.isCancelled && !Task.isShuttingDownGracefully && !connection.isClosed {
                    if try await tryLock(connection) {
                        logger.notice("this server leads the projections")
                        standingBy = false
                        await lead(while: connection)
                        logger.notice("this server no longer leads the projections")
                        break
                    }
                    if !standingBy {
                        logger.info("another ledger server on this database leads the projections; this one stands by")
                        standingBy = true
                    }
                    await pause()
                }
            } catch {
                logger.debug("could not ask for the projections' lead; asking again shortly", metadata: ["ledger.error": "\(error)"])
            }
            await pause()
        }
    }

    /// Whether this session now holds the lock (it keeps it until the session ends).
    private func tryLock(_ connection: PostgresConnection) async throws -> Bool {
        let rows = try await untilAbandoned(after: .seconds(5)) { [logger] in
            try await connection.unlessClosed(during: "asking for the projections' lead") {
                try await connection.allRows("SELECT pg_try_advisory_lock(\(Self.lockKey))", logger: logger)
            }
        }
        return try rows.first?.decode(Bool.self) ?? false
    }

    /// Runs the projections until shutdown, or until the lock's session ends.
    private func lead(while connection: PostgresConnection) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [runner] in try? await runner.run() }
            for companion in companions {
                // A companion ending does not end the lead: only the runner or the lock's session
                // do. When the lead ends, a companion still waiting (on a connection PostgreSQL
                // dropped, say) is cancelled and abandoned, so that it never holds the lead's end,
                // nor the server's shutdown.
                group.addTask {
                    let (ended, end) = AsyncStream<Void>.makeStream()
                    await withTaskCancellationHandler {
                        _ = try? await untilAbandoned({
                            await companion()
                            while !Task.isCancelled { try? await Task.sleep(for: .seconds(3_600)) }
                        }, abandonWhen: {
                            for await _ in ended {}
                            return CancellationError()
                        })
                    } onCancel: {
                        end.finish()
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled && !connection.isClosed {
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Waits `retryInterval`, or less if the server shuts down meanwhile.
    private func pause() async {
        try? await cancelWhenGracefulShutdown { [retryInterval] in
            try await Task.sleep(for: retryInterval)
        }
    }
}
