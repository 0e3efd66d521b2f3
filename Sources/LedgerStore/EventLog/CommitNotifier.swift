import Logging
import PostgresNIO
import Synchronization

/// Wakes followers after appends commit, with at most one NOTIFY in flight per store.
///
/// NOTIFY inside the appending transaction would make PostgreSQL serialise those commits (it
/// holds a global lock through the commit), so it is sent after the commit instead. Appends that
/// commit while a NOTIFY is on its way mark the store dirty, and the sender sends one more: every
/// commit is followed by at least one NOTIFY sent after it. A lost NOTIFY costs a poll interval.
final class CommitNotifier: Sendable {
    private struct State {
        var sending = false
        var dirty = false
    }

    private let state = Mutex(State())

    func committed(client: DatabasePool, logger: Logger) async {
        let shouldSend = state.withLock { state -> Bool in
            state.dirty = true
            guard !state.sending else { return false }
            state.sending = true
            return true
        }
        guard shouldSend else { return }
        while true {
            let more = state.withLock { state -> Bool in
                guard state.dirty else {
                    state.sending = false
                    return false
                }
                state.dirty = false
                return true
            }
            guard more else { return }
            do {
                try await client.query("SELECT pg_notify(\(PostgresEventStore.notificationChannel), '')", logger: logger)
            } catch {
                logger.debug("could not notify followers; they will poll", metadata: ["ledger.error": "\(error)"])
            }
        }
    }
}
