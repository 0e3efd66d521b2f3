import Foundation
import Hummingbird
import HummingbirdTesting
@testable import LedgerHTTP
import LedgerTesting
import Testing

@Suite("HTTP request metrics")
struct MetricsMiddlewareTests {
    /// An error the HTTP layer does not know: a 500.
    struct Unexpected: Error {}

    /// Routes of their own, so that other tests in the process cannot move these series.
    func application() -> some ApplicationProtocol {
        let registry = LedgerMetrics.bootstrap()
        let router = Router()
        // Qualified: Hummingbird has a MetricsMiddleware of its own.
        router.middlewares.add(LedgerHTTP.MetricsMiddleware())
        router.get("/metrics-test/items/:itemId") { _, _ in "item" }
        router.post("/metrics-test/items/:itemId/refuse") { _, _ -> String in throw HTTPError(.conflict) }
        router.get("/metrics-test/crash") { _, _ -> String in throw Unexpected() }
        MetricsController(registry: registry, access: .token(Self.token)).addRoutes(to: router)
        return Application(router: router)
    }

    static let token = "metrics-token-for-the-tests"
    static var bearer: HTTPFields { [.authorization: "Bearer \(token)"] }

    @Test("/metrics counts requests by method, route template and status, and unmatched paths as one route")
    func countsRequestsByRouteTemplate() async throws {
        let before = PrometheusSamples.current()
        try await application().test(.router) { client in
            for id in ["a", "b", "c"] {
                try await client.execute(uri: "/metrics-test/items/\(id)", method: .get) { #expect($0.status == .ok) }
            }
            try await client.execute(uri: "/metrics-test/items/a/refuse", method: .post) { #expect($0.status == .conflict) }
            try await client.execute(uri: "/metrics-test/crash", method: .get) { #expect($0.status == .internalServerError) }
            try await client.execute(uri: "/metrics-test/nowhere/\(UUID())", method: .get) { #expect($0.status == .notFound) }

            try await client.execute(uri: "/metrics", method: .get, headers: Self.bearer) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
                let after = PrometheusSamples(text: String(buffer: response.body))
                let name = "ledger_http_requests_total"
                #expect(after.increase(name, ["method": "GET", "route": "/metrics-test/items/{itemId}", "status": "200"], since: before) == 3)
                #expect(after.increase(name, ["method": "POST", "route": "/metrics-test/items/{itemId}/refuse", "status": "409"], since: before) == 1)
                #expect(after.increase(name, ["method": "GET", "route": "/metrics-test/crash", "status": "500"], since: before) == 1)
                #expect(after.increase(name, ["method": "GET", "route": "unmatched", "status": "404"], since: before) >= 1)
                #expect(!after.text.contains("/metrics-test/items/a\""), "ids never become label values")
                #expect(!after.text.contains("/metrics-test/nowhere"), "unmatched paths never become label values")
                #expect(after.increase("ledger_http_request_duration_seconds_count",
                                       ["method": "GET", "route": "/metrics-test/items/{itemId}"], since: before) == 3)
            }
        }
    }

    @Test("bootstrapping twice hands back the same registry")
    func bootstrapIsIdempotent() {
        #expect(LedgerMetrics.bootstrap() === LedgerMetrics.bootstrap())
    }

    @Test("/metrics on the API's listener needs the metrics token; without one configured nobody reads them there; a listener of their own is open")
    func metricsNeedTheirToken() async throws {
        try await application().test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(Self.token)x"]) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/metrics", method: .get, headers: Self.bearer) { #expect($0.status == .ok) }
        }
        let closed = Router(context: LedgerRequestContext.self)
        closed.middlewares.add(ErrorMiddleware())
        MetricsController(registry: LedgerMetrics.bootstrap(), access: .token(nil)).addRoutes(to: closed)
        try await Application(router: closed).test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get, headers: Self.bearer) { response in
                #expect(response.status == .forbidden)
                #expect(String(buffer: response.body).contains("--metrics-port"))
            }
        }
        try await LedgerServer.metricsApplication(host: "127.0.0.1", port: 0, logger: quietLogger).test(.live) { client in
            try await client.execute(uri: "/metrics", method: .get) { #expect($0.status == .ok) }
        }
    }
}
