import LedgerApplication
import Logging
import PostgresNIO
import Synchronization

/// Runs `operation` in a task of its own and returns what it returns, unless `abandonWhen`
/// returns an error first: then that error is thrown, and the operation's task is cancelled and
/// left to end on its own.
///
/// For waits that postgres-nio can leave unanswered for ever when PostgreSQL goes away at the
/// wrong instant (a statement written to a connection as it closes, a COPY in flight): a task
/// that awaits them directly never resumes, and cancelling it does not help either. The task left
/// behind holds only a connection that is closed.
///
/// A task group with a timer child is no substitute: the group waits for every child before it
/// returns, so a child that never resumes keeps it, and whoever awaits it, waiting for ever (the
/// database monitor stopped for good that way, and with it the 503s of the next outage).
public func untilAbandoned<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result,
    abandonWhen: @escaping @Sendable () async -> (any Error)?,
    discardingLate discard: (@Sendable (Result) async -> Void)? = nil
) async throws -> Result {
    try await race(operation, discardingLate: discard) { outcome in
        let watch = Task {
            if let error = await abandonWhen() { outcome.finish(.failure(error)) }
        }
        return { watch.cancel() }
    }
}

extension PostgresConnection {
    /// Runs `operation`, which uses this connection, and gives it up with a `databaseUnavailable`
    /// error as soon as the connection closes (see `untilAbandoned` for why a wait on a closed
    /// connection must be given up rather than awaited). `during` names the work for the message.
    ///
    /// Watched through one `closeFuture` callback per connection (`ConnectionCloseWatch`), so a
    /// statement costs a task and no timer.
    func unlessClosed<Result: Sendable>(
        during work: String,
        _ operation: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        let closed = StoreError.databaseUnavailable("the connection to PostgreSQL closed during \(work)")
        return try await race(operation) { outcome in
            guard let token = ConnectionCloseWatch.shared.watch(self, onClose: { outcome.finish(.failure(closed)) }) else {
                throw closed
            }
            return { ConnectionCloseWatch.shared.unwatch(token) }
        }
    }
}

extension PostgresConnection {
    /// The rows of `query`, all read, through postgres-nio's collecting path rather than its row
    /// sequence.
    ///
    /// The row sequence applies back-pressure: after each batch it holds the channel's next read
    /// until the consumer asks for more. When PostgreSQL closes the connection in that state, NIO
    /// hands over the rest of the socket without a read, and postgres-nio 1.33.2 stops the whole
    /// process on a precondition (`RowStreamStateMachine.channelReadComplete`: "How can we receive a
    /// body part, after a channelReadComplete, but no read has been forwarded yet"): `ledger serve`
    /// died that way when PostgreSQL crashed under load. The collecting path asks for more rows as
    /// soon as it receives some, so a read is never held.
    func allRows(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> [PostgresRow] {
        let result: EventLoopFuture<PostgresQueryResult> = self.query(query, logger: logger, file: file, line: line)
        return try await result.get().rows
    }
}

/// Runs `operation`, and gives it up after `limit` with `TimedOut` (see `untilAbandoned`).
///
/// `discard` gets what the operation gives when it comes after the wait was given up (a
/// connection to close, say), so that nothing it holds is dropped unreleased.
public func untilAbandoned<Result: Sendable>(
    after limit: Duration,
    discardingLate discard: (@Sendable (Result) async -> Void)? = nil,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await untilAbandoned(operation, abandonWhen: {
        try? await Task.sleep(for: limit)
        return TimedOut(limit: limit)
    }, discardingLate: discard)
}

/// A wait given up after its time limit.
public struct TimedOut: Error, CustomStringConvertible {
    public let limit: Duration
    public var description: String { "no answer within \(limit)" }
}

/// Runs `operation` in a task of its own; `arm` sets up what may end the wait first (it calls
/// `outcome.finish` with an error) and returns how to take that down again.
private func race<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result,
    discardingLate discard: (@Sendable (Result) async -> Void)? = nil,
    arm: (Outcome<Result>) throws -> @Sendable () -> Void
) async throws -> Result {
    let outcome = Outcome<Result>()
    let disarm = try arm(outcome)
    defer { disarm() }
    let work = Task {
        do {
            let value = try await operation()
            if !outcome.finish(.success(value)) { await discard?(value) }
        } catch {
            outcome.finish(.failure(error))
        }
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            outcome.wait(continuation)
        }
    } onCancel: {
        work.cancel()
    }
}

/// The first result of two racers, handed to one waiter whenever it arrives.
final class Outcome<Result: Sendable>: Sendable {
    private struct State {
        var result: Swift.Result<Result, any Error>?
        var waiter: CheckedContinuation<Result, any Error>?
    }

    private let state = Mutex(State())

    /// Whether `result` is the one the waiter gets (false when another came first).
    @discardableResult
    func finish(_ result: Swift.Result<Result, any Error>) -> Bool {
        let (taken, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result, any Error>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(with: result)
        return taken
    }

    func wait(_ continuation: CheckedContinuation<Result, any Error>) {
        let ready = state.withLock { state -> Swift.Result<Result, any Error>? in
            if let result = state.result { return result }
            state.waiter = continuation
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }
}

/// Calls back whoever waits on a connection when it closes, with one `closeFuture` callback per
/// connection however many statements wait on it over its life (a callback per statement would
/// stay registered for as long as the pool keeps the connection).
final class ConnectionCloseWatch: Sendable {
    static let shared = ConnectionCloseWatch()

    struct Token: Sendable {
        fileprivate let connection: ObjectIdentifier
        fileprivate let waiter: UInt64
    }

    private struct State {
        var nextWaiter: UInt64 = 0
        /// Connections with a callback registered, and who waits on each.
        var watched: [ObjectIdentifier: [UInt64: @Sendable () -> Void]] = [:]
    }

    private let state = Mutex(State())

    /// Calls `onClose` once `connection` closes, unless `unwatch` comes first; nil when it is
    /// closed already.
    func watch(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) -> Token? {
        guard !connection.isClosed else { return nil }
        let key = ObjectIdentifier(connection)
        let (token, isNew) = state.withLock { state -> (Token, Bool) in
            state.nextWaiter += 1
            let isNew = state.watched[key] == nil
            state.watched[key, default: [:]][state.nextWaiter] = onClose
            return (Token(connection: key, waiter: state.nextWaiter), isNew)
        }
        // Outside the lock: on a future already complete, the callback may run at once.
        if isNew {
            connection.closeFuture.whenComplete { [self] _ in
                let waiters = state.withLock { $0.watched.removeValue(forKey: key) } ?? [:]
                waiters.values.forEach { $0() }
            }
        }
        return token
    }

    func unwatch(_ token: Token) {
        state.withLock { _ = $0.watched[token.connection]?.removeValue(forKey: token.waiter) }
    }

    /// How many waits are registered on `connection`; nil when it has no callback (for tests).
    func waiters(on connection: PostgresConnection) -> Int? {
        state.withLock { $0.watched[ObjectIdentifier(connection)]?.count }
    }
}

extension PostgresConnection {
    /// A connection of its own (a LISTEN, a session lock), given up after `patience` rather than
    /// awaited: a connect to a server that does not answer must not hold its caller.
    static func connect(
        _ configuration: PostgresConnection.Configuration, id: Int, within patience: Duration = .seconds(5), logger: Logger
    ) async throws -> PostgresConnection {
        // A connection that comes after the caller gave up is closed, not dropped open.
        try await untilAbandoned(after: patience, discardingLate: { late in try? await late.close() }) {
            try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
        }
    }
}
