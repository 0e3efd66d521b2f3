import Foundation
import Hummingbird
import LedgerStore

/// While the database does not answer, requests that need it are answered 503 at once, and the
/// ones already waiting for it are let go with the same answer: nothing queues behind an outage.
/// Whether a write let go was recorded is not known; sent again, it is recorded once.
struct DatabaseGateMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    let monitor: DatabaseMonitor
    /// Paths that never touch the database (and `/health`, which answers from the monitor).
    static let ungated: Set<String> = ["/health", "/metrics", "/openapi.json"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !Self.ungated.contains(request.uri.path) else { return try await next(request, context) }
        if case .down(let since, _) = monitor.state { throw APIError.databaseUnavailable(since: since) }
        do {
            // The handler runs in this task; a watcher beside it cancels this task when the
            // database is seen down. The group outlives the watcher, so the task it cancels does too.
            return try await withThrowingTaskGroup(of: Void.self) { group in
                let task = withUnsafeCurrentTask { $0 }
                group.addTask {
                    await monitor.waitUntilDown()
                    if !Task.isCancelled { task?.cancel() }
                }
                defer { group.cancelAll() }
                do {
                    return try await next(request, context)
                } catch where monitor.isDown {
                    throw APIError.databaseUnavailable(since: nil)
                }
            }
        } catch {
            if DatabaseOutage.isOutage(error) { monitor.reportOutage(error) }
            throw error
        }
    }
}

extension APIError {
    /// 503 while PostgreSQL is down or restarting: says only what the ledger knows.
    static func databaseUnavailable(since: Date?) -> APIError {
        let when = since.map { " (since \($0.formatted(.iso8601)))" } ?? ""
        return .unavailable(
            "database_unavailable",
            "the ledger's database does not answer\(when); a write sent now may or may not have been recorded: send the same request again (the same receipt, or the same Idempotency-Key) once the ledger answers, and it is recorded once"
        )
    }
}
