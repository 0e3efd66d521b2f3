import Logging
import PostgresNIO
import Synchronization

/// Wakes followers after appends commit, with at most one NOTIFY in flight per store, and under
/// load at most one per `interval`.
///
/// NOTIFY inside the appending transaction would make PostgreSQL serialise those commits (it
/// holds a global lock through the commit), so it is sent after the commit instead. Appends that
/// commit while a NOTIFY is on its way mark the store dirty, and the sender sends one more, once
/// `interval` has passed since the last: every commit is followed by at least one NOTIFY sent after
/// it, the first after a quiet spell at once. Without the interval, 16 writers sent a NOTIFY for
/// nearly every append (each a statement of its own); with it, followers learn of a busy log's
/// appends a few milliseconds later, in one wake-up. A lost NOTIFY costs a poll interval.
final class CommitNotifier: Sendable {
    private struct State {
        var sending = false
        var dirty = false
    }

    private let state = Mutex(State())
    private let interval: Duration

    init(interval: Duration = .milliseconds(2)) {
        self.interval = interval
    }

    /// Called after a commit; returns at once. The NOTIFYs are sent by a task of their own, so no
    /// append waits for its followers' wake-up.
    func committed(client: DatabasePool, logger: Logger) {
        let shouldSend = state.withLock { state -> Bool in
            state.dirty = true
            guard !state.sending else { return false }
            state.sending = true
            return true
        }
        guard shouldSend else { return }
        Task { await send(client: client, logger: logger) }
    }

    private func send(client: DatabasePool, logger: Logger) async {
        var lastSent: ContinuousClock.Instant?
        while true {
            if let lastSent {
                try? await Task.sleep(until: lastSent + interval, clock: .continuous)
            }
            let more = state.withLock { state -> Bool in
                guard state.dirty else {
                    state.sending = false
                    return false
                }
                state.dirty = false
                return true
            }
            guard more else { return }
            lastSent = .now
            do {
                try await client.query("SELECT pg_notify(\(PostgresEventStore.notificationChannel), '')", logger: logger)
            } catch {
                logger.debug("could not notify followers; they will poll", metadata: ["ledger.error": "\(error)"])
            }
        }
    }
}
