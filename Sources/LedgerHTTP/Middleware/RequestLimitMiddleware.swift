import Hummingbird
import Synchronization

/// Caps the API requests in flight: one past `limit` is answered 503 `overloaded` (retryable, with
/// `Retry-After`) at once, before its key is checked or its body read, so that slow or numerous
/// clients cannot pile up work, memory and database waits without bound.
///
/// Only `/v1/…` counts: `/health`, `/metrics` and `/openapi.json` still answer an overloaded server.
struct RequestLimitMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    let limit: Int
    let inFlight = InFlightCounter()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix("/v1/") else { return try await next(request, context) }
        guard inFlight.enter(limit: limit) else { throw APIError.overloaded(limit: limit) }
        defer { inFlight.leave() }
        return try await next(request, context)
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
