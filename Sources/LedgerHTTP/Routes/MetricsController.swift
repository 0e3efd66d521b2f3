import Crypto
import Foundation
import Hummingbird
import Prometheus

/// `GET /metrics`: every metric of the registry in the Prometheus text format 0.0.4.
///
/// On the API's listener, which strangers may reach, only with the operator's metrics token
/// (`Authorization: Bearer …`, `LEDGER_METRICS_TOKEN`); without one configured it answers 403 and
/// says how to expose them. On a listener of its own (`--metrics-port`, loopback by default) it
/// answers everyone who can reach that listener.
public struct MetricsController: Sendable {
    /// The exposition format's content type, which Prometheus scrapers negotiate on.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Who may read the metrics on this listener.
    public enum Access: Sendable {
        /// Whoever reaches the listener (one of its own, not the API's).
        case open
        /// The bearer of this token; nil: nobody here (the metrics are elsewhere, or nowhere).
        case token(String?)
    }

    let registry: PrometheusCollectorRegistry
    let access: Access

    public init(registry: PrometheusCollectorRegistry, access: Access) {
        self.registry = registry
        self.access = access
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/metrics") { request, _ -> Response in
            try check(request)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16 * 1024)
            registry.emit(into: &bytes)
            var headers = HTTPFields()
            headers[.contentType] = Self.contentType
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }

    func check(_ request: Request) throws {
        guard case .token(let expected) = access else { return }
        guard let expected else {
            throw APIError(.forbidden, "metrics_not_exposed",
                           "this listener serves /metrics only to the bearer of the metrics token: set LEDGER_METRICS_TOKEN, or scrape a listener of its own (--metrics-port)")
        }
        let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
        // Compared as digests: equal length, and no early exit on the first differing byte.
        guard SHA256.hash(data: Data(given.utf8)) == SHA256.hash(data: Data(expected.utf8)) else {
            var error = APIError(.unauthorized, "invalid_key", "GET /metrics on this listener needs Authorization: Bearer <the metrics token>")
            error.headers[.wwwAuthenticate] = "Bearer realm=\"metrics\""
            throw error
        }
    }
}
