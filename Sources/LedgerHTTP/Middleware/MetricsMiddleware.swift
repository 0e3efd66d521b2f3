import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

/// Counts and times every request by method, matched route template and status.
///
/// `ledger_http_requests_total{method, route, status}` and
/// `ledger_http_request_duration_seconds{method, route}`. `route` is the template the router
/// matched (`/v1/apps/{bundleId}/products`), never the raw path, so ids do not become label
/// values; a request no route matched is `unmatched`. A thrown error counts with its
/// `HTTPResponseError` status, anything else as 500. The duration ends when the handler returns
/// its response: the time to stream a body after that is not included.
///
/// Add it to the router before the routes (Hummingbird applies a router's middleware to the
/// routes added after it) and inside any middleware that turns errors into responses, or add it
/// first and let it see the thrown errors.
public struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    private let cache = MetricCache()

    public init() {}

    public func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        do {
            var response = try await next(request, context)
            let took = record(request, context, status: response.status, since: start)
            // The server's own time for the answer, for whoever measures from outside (RFC: Server-Timing).
            response.headers[Self.serverTiming] = "app;dur=" + String(format: "%.3f", Double(took.components.attoseconds) / 1e15 + Double(took.components.seconds) * 1e3)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            record(request, context, status: status, since: start)
            throw error
        }
    }

    @discardableResult
    private func record(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant) -> Duration {
        let method = Self.methodLabel(request.method)
        let route = Self.routeLabel(context.endpointPath)
        let took = ContinuousClock.now - start
        cache.timer(method: method, route: route).record(duration: took)
        cache.counter(method: method, route: route, status: status.code).increment()
        return took
    }

    static var serverTiming: HTTPField.Name { HTTPField.Name("Server-Timing")! }

    /// The route template; Hummingbird says `NotFound` (or nothing) when no route matched.
    static func routeLabel(_ endpointPath: String?) -> String {
        guard let endpointPath, endpointPath != "NotFound" else { return "unmatched" }
        return endpointPath
    }

    /// Standard methods by name; anything a client invents is `other`, so it cannot add series.
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .delete, .patch, .options, .connect, .trace: method.rawValue
        default: "other"
        }
    }
}

/// The metric objects already made, by their dimensions: made once, not per request.
private final class MetricCache: Sendable {
    private struct CounterKey: Hashable {
        let method: String
        let route: String
        let status: Int
    }

    private struct TimerKey: Hashable {
        let method: String
        let route: String
    }

    private struct Storage {
        var counters: [CounterKey: Counter] = [:]
        var timers: [TimerKey: Timer] = [:]
    }

    private let storage = Mutex(Storage())

    func counter(method: String, route: String, status: Int) -> Counter {
        let key = CounterKey(method: method, route: route, status: status)
        return storage.withLock { storage in
            if let counter = storage.counters[key] { return counter }
            let counter = Counter(
                label: "ledger_http_requests_total",
                dimensions: [("method", method), ("route", route), ("status", String(status))]
            )
            storage.counters[key] = counter
            return counter
        }
    }

    func timer(method: String, route: String) -> Timer {
        let key = TimerKey(method: method, route: route)
        return storage.withLock { storage in
            if let timer = storage.timers[key] { return timer }
            let timer = Timer(
                label: "ledger_http_request_duration_seconds",
                dimensions: [("method", method), ("route", route)],
                preferredDisplayUnit: .seconds
            )
            storage.timers[key] = timer
            return timer
        }
    }
}
