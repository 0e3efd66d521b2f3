import Synchronization

/// Runs `operation` in a task of its own and returns what it returns, unless `abandonWhen`
/// returns an error first: then that error is thrown, and the operation's task is cancelled and
/// left to end on its own.
///
/// For waits that postgres-nio can leave unanswered for ever when PostgreSQL goes away at the
/// wrong instant (a statement written to a connection as it closes, a COPY in flight): a task
/// that awaits them directly never resumes, and cancelling it does not help either. The task left
/// behind holds only a connection that is closed.
func untilAbandoned<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result,
    abandonWhen: @escaping @Sendable () async -> (any Error)?
) async throws -> Result {
    let outcome = Outcome<Result>()
    let work = Task {
        do {
            outcome.finish(.success(try await operation()))
        } catch {
            outcome.finish(.failure(error))
        }
    }
    let watch = Task {
        if let error = await abandonWhen() { outcome.finish(.failure(error)) }
    }
    defer { watch.cancel() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            outcome.wait(continuation)
        }
    } onCancel: {
        work.cancel()
        watch.cancel()
    }
}

/// The first result of two racers, handed to one waiter whenever it arrives.
private final class Outcome<Result: Sendable>: Sendable {
    private struct State {
        var result: Swift.Result<Result, any Error>?
        var waiter: CheckedContinuation<Result, any Error>?
    }

    private let state = Mutex(State())

    func finish(_ result: Swift.Result<Result, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
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
