import Synchronization

/// How far the change feed has been written, as its writer announces it (`NOTIFY ledger_changes,
/// 'feed <position>'`, heard by `ChangeFeed`), for the long polls waiting on it in this server.
public final class FeedSignal: Sendable {
    private struct State {
        var position: Int64 = 0
        var waiters: [Int: (after: Int64, continuation: CheckedContinuation<Void, Never>)] = [:]
        var next = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The writer announced `position`: wakes every wait for a position before it.
    public func written(through position: Int64) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.position = max(state.position, position)
            let due = state.waiters.filter { $0.value.after < position }
            for key in due.keys { state.waiters[key] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once a position after `position` is announced (at once if one was), after
    /// `timeout`, or when the task is cancelled.
    public func wait(after position: Int64, atMost timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            let key = state.withLock { state -> Int in
                state.next += 1
                return state.next
            }
            group.addTask { [self] in
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let now = state.withLock { state -> Bool in
                            if state.position > position || Task.isCancelled { return true }
                            state.waiters[key] = (position, continuation)
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    cancel(key)
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    private func cancel(_ key: Int) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: key) }
        waiter?.continuation.resume()
    }
}
