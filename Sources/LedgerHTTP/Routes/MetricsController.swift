import Hummingbird
import Prometheus

/// `GET /metrics`: no auth; every metric of the registry in the Prometheus text format 0.0.4.
public struct MetricsController: Sendable {
    /// The exposition format's content type, which Prometheus scrapers negotiate on.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    let registry: PrometheusCollectorRegistry

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/metrics") { _, _ -> Response in
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16 * 1024)
            registry.emit(into: &bytes)
            var headers = HTTPFields()
            headers[.contentType] = Self.contentType
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
}
