import Foundation
import LedgerApplication
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Whether an error means PostgreSQL could not be reached or went away mid-request (down,
/// restarting, shutting down, out of connections), rather than refusing a statement. Such a
/// request may or may not have been recorded; sent again, it is recorded once.
public enum DatabaseOutage {
    /// A statement the database gave up on in time: `lock_not_available` (55P03, lock_timeout),
    /// `query_canceled` (57014, statement_timeout), a deadlock (40P01) or a serialization failure
    /// (40001). Its transaction was rolled back: nothing of it was recorded.
    public static func isBusy(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server, let state = error.serverInfo?[.sqlState] else { return false }
        return ["55P03", "57014", "40P01", "40001"].contains(state)
    }

    public static func isOutage(_ error: any Error) -> Bool {
        switch error {
        case let error as StoreError:
            return error.code == .databaseUnavailable
        case let error as PSQLError:
            switch error.code {
            case .connectionError, .serverClosedConnection, .uncleanShutdown, .poolClosed, .clientClosedConnection:
                return true
            case .server:
                guard let state = error.serverInfo?[.sqlState] else { return false }
                // 08: connection exception; 57P01-03: the server is shutting down, crashed or
                // starting; 53300: too many connections.
                return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state)
            default:
                return false
            }
        default:
            // The pool's own refusal once it stopped trying (its circuit breaker), a type of a
            // module the ledger does not import.
            return String(describing: type(of: error)) == "ConnectionPoolError"
        }
    }
}

/// Watches whether PostgreSQL answers, with connections of its own (never the pool's), so that
/// while it is down requests are answered 503 at once instead of queueing in the pool. When it is
/// seen down, `pool` is replaced: the requests waiting in the old one fail at once.
///
/// It probes every second while the database answers, and every 200 ms after an outage was seen
/// (a probe failed, or a request met an outage error and said so with `reportOutage`). When the
/// database answers again and `pool` still cannot lend a connection (its own reconnection attempts
/// back off, see `DatabasePool`), it renews the pool.
public final class DatabaseMonitor: Service, DatabaseAvailability, Sendable {
    private struct Shared {
        var state: DatabaseState = .up
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        var poked = false
    }

    private let settings: DatabaseSettings
    private let pool: DatabasePool?
    private let logger: Logger
    private let shared = Mutex(Shared())

    public init(settings: DatabaseSettings, renewing pool: DatabasePool? = nil, logger: Logger) {
        self.settings = settings
        self.pool = pool
        self.logger = logger
    }

    public var state: DatabaseState { shared.withLock { $0.state } }

    public func isOutage(_ error: any Error) -> Bool { DatabaseOutage.isOutage(error) }
    public func isBusy(_ error: any Error) -> Bool { DatabaseOutage.isBusy(error) }

    /// A request met an outage error: probe now rather than at the next tick.
    public func reportOutage(_ error: any Error) {
        shared.withLock { $0.poked = true }
    }

    /// Returns when the database is seen down (at once if it is), or when the task is cancelled.
    public func waitUntilDown() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = shared.withLock { shared -> Bool in
                    if case .down = shared.state { return true }
                    if Task.isCancelled { return true }
                    shared.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            shared.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    public func run() async throws {
        // A probe that is only slow (a busy machine: a new connection's authentication takes CPU)
        // is no outage by itself: the database is called down when a probe is refused, or when two
        // in a row are not answered in time.
        var slowBefore = false
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let (reason, timedOut) = await probe()
            // A probe cut short by the shutdown says nothing of the database.
            if Task.isCancelled || Task.isShuttingDownGracefully { break }
            if timedOut, !slowBefore, !isDown {
                slowBefore = true
                logger.debug("the database's probe was not answered in time; probing again before calling it down")
                await sleep(for: .milliseconds(200))
                continue
            }
            slowBefore = timedOut
            await record(reason)
            await sleep(for: reason == nil ? .seconds(1) : .milliseconds(200))
        }
        // Requests still waiting for an outage are let go when they end (their watchers are cancelled).
    }

    /// nil when the database answered within a second; else why not. The probe is given up, not
    /// awaited, when it takes longer: postgres-nio may never answer a statement on a connection
    /// PostgreSQL drops at that instant, and the monitor must go on probing.
    private func probe() async -> (reason: String?, timedOut: Bool) {
        do {
            try await untilAbandoned(after: .seconds(1)) { [settings, logger] in
                let connection = try await PostgresConnection.connect(
                    configuration: settings.connectionConfiguration, id: 0, logger: logger
                )
                defer { Task { try? await connection.close() } }
                _ = try await connection.unlessClosed(during: "the monitor's probe") {
                    try await connection.query("SELECT 1", logger: logger).collect()
                }
            }
            return (nil, false)
        } catch is TimedOut {
            return ("PostgreSQL did not answer within 1 s", true)
        } catch let error as PSQLError {
            return (error.serverInfo?[.message] ?? "\(error.code)", false)
        } catch {
            return ("\(error)", false)
        }
    }

    private func record(_ reason: String?) async {
        let (changed, waiters) = shared.withLock { shared -> (DatabaseState?, [CheckedContinuation<Void, Never>]) in
            switch (shared.state, reason) {
            case (.up, nil):
                return (nil, [])
            case (.down, nil):
                shared.state = .up
                return (.up, [])
            case (.up, let reason?):
                shared.state = .down(since: Date(), reason: reason)
                let waiters = Array(shared.waiters.values)
                shared.waiters = [:]
                return (shared.state, waiters)
            case (.down(let since, _), let reason?):
                shared.state = .down(since: since, reason: reason)
                return (nil, [])
            }
        }
        waiters.forEach { $0.resume() }
        switch changed {
        case .down(_, let reason)?:
            pool?.renew()
            logger.error("the database does not answer: requests are refused with 503 until it does", metadata: ["ledger.reason": "\(reason)"])
        case .up?:
            // The new pool's reconnection attempts back off as the outage goes on, as the old one's did.
            if let pool, await !pool.answers(within: .milliseconds(250), logger: logger) {
                pool.renew()
                logger.notice("the database answers again: the connection pool, still waiting to retry, is replaced by a new one")
            } else {
                logger.notice("the database answers again")
            }
        case nil:
            break
        }
    }

    /// Sleeps for `duration`, or until `reportOutage`, cancellation or shutdown ends it early
    /// (looked at every 50 ms: nothing to register, nothing to leave behind).
    private func sleep(for duration: Duration) async {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline && !Task.isCancelled && !Task.isShuttingDownGracefully {
            let poked = shared.withLock { shared -> Bool in
                defer { shared.poked = false }
                return shared.poked
            }
            if poked { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
