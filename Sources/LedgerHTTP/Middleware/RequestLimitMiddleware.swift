import Hummingbird
import Synchronization

/// Caps the API requests in flight: one past `limit` is answered 503 `overloaded` (retryable, with
/// `Retry-After`) at once, before its key is checked or its body read, so that slow or numerous
/// clients cannot pile up work, memory and database waits without bound.
///
/// Only `/v1/…` counts: `/health`, `/metrics` and `/openapi.json` still answer an overloaded server.
/// The keyless notifications webhook counts apart, against `webhookLimit`: strangers can reach
/// it, and however many of them hold its slots (half-sent bodies, costly chains), keyed requests
/// keep theirs.
struct RequestLimitMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    let limit: Int
    let webhookLimit: Int
    let inFlight = InFlightCounter()
    let webhooksInFlight = InFlightCounter()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard path.hasPrefix("/v1/") else { return try await next(request, context) }
        if Self.isWebhook(request.method, path) {
            guard webhooksInFlight.enter(limit: webhookLimit) else { throw APIError.overloaded(limit: webhookLimit) }
            defer { webhooksInFlight.leave() }
            return try await next(request, context)
        }
        guard inFlight.enter(limit: limit) else { throw APIError.overloaded(limit: limit) }
        defer { inFlight.leave() }
        return try await next(request, context)
    }

    /// `POST /v1/apps/{bundleId}/notifications`.
    static func isWebhook(_ method: HTTPRequest.Method, _ path: String) -> Bool {
        guard method == .post else { return false }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 5 && parts[1] == "v1" && parts[2] == "apps" && parts[4] == "notifications"
    }
}

/// The number of requests being answered.
final class InFlightCounter: Sendable {
    private let count = Atomic<Int>(0)

    /// Counts one more, unless `limit` are in flight already.
    func enter(limit: Int) -> Bool {
        var current = count.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = count.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    func leave() {
        count.subtract(1, ordering: .acquiringAndReleasing)
    }
}
