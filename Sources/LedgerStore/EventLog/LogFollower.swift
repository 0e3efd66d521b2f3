import LedgerDomain
import Logging
import PostgresNIO

/// Follows the log in position order, delivering every committed event exactly once.
///
/// It reads through `PostgresEventStore.readAll`, which never returns a position while an earlier
/// one could still commit, so the checkpoint can safely be the last delivered position. It wakes on
/// `NOTIFY ledger_events` from a dedicated connection and polls as well, so a lost notification, a
/// dropped listener connection or a rolled-back append only costs one poll interval.
public struct LogFollower: Sendable {
    let store: PostgresEventStore
    let listenConfiguration: PostgresConnection.Configuration?
    let pollInterval: Duration
    let batchSize: Int
    let logger: Logger

    /// - Parameter listenConfiguration: where to LISTEN; `nil` polls only.
    public init(
        store: PostgresEventStore,
        listenConfiguration: PostgresConnection.Configuration?,
        pollInterval: Duration = .seconds(1),
        batchSize: Int = 1_000,
        logger: Logger
    ) {
        self.store = store
        self.listenConfiguration = listenConfiguration
        self.pollInterval = pollInterval
        self.batchSize = batchSize
        self.logger = logger
    }

    /// Delivers batches after `position` until the task is cancelled or `handle` throws.
    /// `handle` sees each event once, in position order; a batch is never empty. `whenCaughtUp`
    /// runs, with the last position delivered, each time a read finds less than a full batch:
    /// everything visible has been delivered (also when the log ends exactly on a full batch).
    public func follow(
        after position: Int64,
        stream: StreamID? = nil,
        whenCaughtUp: (Int64) async throws -> Void = { _ in },
        _ handle: ([RecordedEvent]) async throws -> Void
    ) async throws {
        let wakeUp = WakeUp()
        try await withThrowingTaskGroup(of: Void.self) { group in
            if let listenConfiguration {
                group.addTask { await listen(listenConfiguration, wakeUp: wakeUp) }
            }
            // The reader runs here and ends only by cancellation or error; either ends the listener too.
            defer { group.cancelAll() }
            var checkpoint = position
            while !Task.isCancelled {
                let events = try await store.readAll(after: checkpoint, stream: stream, limit: batchSize)
                if let last = events.last {
                    try await handle(events)
                    checkpoint = last.position
                    if events.count == batchSize { continue }
                }
                try await whenCaughtUp(checkpoint)
                await wakeUp.wait(atMost: pollInterval)
            }
        }
    }

    /// Keeps a LISTEN open, reconnecting after failures, until cancelled.
    private func listen(_ configuration: PostgresConnection.Configuration, wakeUp: WakeUp) async {
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: connectionID, logger: logger
                )
                do {
                    try await connection.listen(on: PostgresEventStore.notificationChannel) { notifications in
                        // A notification sent before LISTEN took effect is covered by this wake-up.
                        await wakeUp.signal()
                        for try await _ in notifications {
                            await wakeUp.signal()
                        }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled { return }
                logger.debug("log listener lost its connection; polling until it reconnects",
                             metadata: ["ledger.error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: pollInterval)
        }
    }
}

/// A one-slot wake-up: a signal with no waiter is kept for the next `wait`.
actor WakeUp {
    private var pending = false
    /// The current wait ended by timeout or cancellation, possibly before its waiter registered.
    private var released = false
    private var waiter: CheckedContinuation<Void, Never>?

    func signal() {
        if let waiter {
            self.waiter = nil
            waiter.resume()
        } else {
            pending = true
        }
    }

    /// Returns at the next signal, after `timeout`, or when the task is cancelled.
    func wait(atMost timeout: Duration) async {
        if pending {
            pending = false
            return
        }
        released = false
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.suspendUntilSignalled() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                await self.release()
            }
            await group.next()
            group.cancelAll()
            await group.waitForAll()
        }
    }

    private func release() {
        if let waiter {
            self.waiter = nil
            waiter.resume()
        } else {
            released = true
        }
    }

    private func suspendUntilSignalled() async {
        await withCheckedContinuation { continuation in
            if pending || released {
                pending = false
                continuation.resume()
            } else {
                waiter = continuation
            }
        }
    }
}
