import Foundation
import Hummingbird
import LedgerApplication

/// While the database does not answer, requests that need it are answered 503 at once. Those
/// already waiting for a connection when it is seen down are let go by the monitor (it replaces
/// the pool, which fails its waiting requests), and answered the same. Whether a write let go was
/// recorded is not known; sent again, it is recorded once.
struct DatabaseGateMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    let monitor: any DatabaseAvailability
    /// Paths that never touch the database (and `/health`, which answers from the monitor).
    static let ungated: Set<String> = ["/health", "/metrics", "/openapi.json"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !Self.ungated.contains(request.uri.path) else { return try await next(request, context) }
        if case .down(let since, _) = monitor.state { throw APIError.databaseUnavailable(since: since) }
        do {
            return try await next(request, context)
        } catch where monitor.isOutage(error) {
            monitor.reportOutage(error)
            throw APIError.databaseUnavailable(since: nil)
        } catch where monitor.isDown {
            throw APIError.databaseUnavailable(since: nil)
        } catch where monitor.isBusy(error) {
            throw APIError.databaseBusy
        }
    }
}

extension APIError {
    /// 503 when the database gave up on the statement in time (a lock held too long by someone
    /// else, a statement timeout, a deadlock): rolled back, nothing recorded, safe to send again.
    static var databaseBusy: APIError {
        var error = APIError.unavailable(
            "database_busy",
            "the ledger's database did not finish this in time (a lock held elsewhere, or a timeout); nothing was recorded: send the same request again"
        )
        error.retryable = true
        return error
    }

    /// 503 while PostgreSQL is down or restarting: says only what the ledger knows.
    static func databaseUnavailable(since: Date?) -> APIError {
        let when = since.map { " (since \($0.formatted(.iso8601)))" } ?? ""
        return .unavailable(
            "database_unavailable",
            "the ledger's database does not answer\(when); a write sent now may or may not have been recorded: send the same request again (the same receipt, or the same Idempotency-Key) once the ledger answers, and it is recorded once"
        )
    }
}
