import Hummingbird
import LedgerApplication

/// One route of the HTTP API, as `/openapi.json` describes it.
public struct APIRoute: Hashable, Sendable, CustomStringConvertible {
    public let method: HTTPRequest.Method
    /// The path in OpenAPI form, e.g. `/v1/apps/{bundleId}/products`.
    public let path: String
    /// nil: no scope needed (and no key at all, unless `anyKey`).
    public let scope: APIScope?
    /// A valid key of any scope is needed (the route describes the key itself).
    public let anyKey: Bool
    /// Takes no key: the body's signature authenticates it (Apple's notifications).
    public let signed: Bool

    public init(_ method: HTTPRequest.Method, _ path: String, _ scope: APIScope?, anyKey: Bool = false, signed: Bool = false) {
        self.method = method
        self.path = path
        self.scope = scope
        self.anyKey = anyKey
        self.signed = signed
    }

    /// The path in Hummingbird's form, e.g. `/v1/apps/:bundleId/products`.
    public var routerPath: String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : String(segment)
        }.joined(separator: "/")
    }

    public var description: String { "\(method) \(path)" }

    /// Whether `path` (a request's, without its query) is this route's, `{name}` matching any one
    /// non-empty segment.
    func matches(_ path: String) -> Bool {
        let template = self.path.split(separator: "/", omittingEmptySubsequences: false)
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard template.count == segments.count else { return false }
        return zip(template, segments).allSatisfy { pattern, segment in
            pattern.hasPrefix("{") && pattern.hasSuffix("}") ? !segment.isEmpty : pattern == segment
        }
    }
}

/// Every route the server serves; the OpenAPI document is checked against this list.
public enum APIRoutes {
    public static let all: [APIRoute] = [
        APIRoute(.get, "/health", nil),
        APIRoute(.get, "/openapi.json", nil),
        APIRoute(.get, "/metrics", nil),
        APIRoute(.put, "/v1/apps/{bundleId}/products/{productId}", .admin),
        APIRoute(.get, "/v1/apps/{bundleId}/products", .read),
        APIRoute(.post, "/v1/apps/{bundleId}/receipts", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/transactions", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/notifications", nil, signed: true),
        APIRoute(.post, "/v1/apps/{bundleId}/transactions/{transactionId}/finish", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/failures", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/transactions/{transactionId}/revoke", .admin),
        APIRoute(.post, "/v1/apps/{bundleId}/users/{userId}/consumptions", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/users/{userId}/devices/{deviceId}/restore", .ingest),
        APIRoute(.put, "/v1/apps/{bundleId}/users/{userId}/app-account-tokens/{token}", .ingest),
        APIRoute(.post, "/v1/apps/{bundleId}/users/{userId}/app-account-tokens", .ingest),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/app-account-tokens", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/notifications/unclaimed", .admin),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/entitlements", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/balances", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/subscriptions", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/history", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/consumption-requests", .read),
        APIRoute(.put, "/v1/apps/{bundleId}/users/{userId}/consumption-consent", .ingest),
        APIRoute(.get, "/v1/apps/{bundleId}/orders/{orderId}", .read),
        APIRoute(.get, "/v1/apps/{bundleId}/changes", .read),
        APIRoute(.post, "/v1/apps/{bundleId}/webhooks", .admin),
        APIRoute(.get, "/v1/apps/{bundleId}/webhooks", .admin),
        APIRoute(.delete, "/v1/apps/{bundleId}/webhooks/{id}", .admin),
        APIRoute(.get, "/v1/apps/{bundleId}/webhooks/{id}/deliveries", .admin),
        APIRoute(.post, "/v1/apps/{bundleId}/webhooks/{id}/resend", .admin),
        APIRoute(.get, "/v1/key", nil, anyKey: true),
        APIRoute(.get, "/v1/audit/events", .finance),
        APIRoute(.get, "/v1/audit/summary", .finance),
        APIRoute(.get, "/v1/audit/unclassified", .finance),
        APIRoute(.get, "/v1/audit/restores", .finance),
        APIRoute(.get, "/v1/audit/reconciliation", .finance),
        APIRoute(.get, "/v1/audit/periods", .finance),
        APIRoute(.get, "/v1/audit/periods/{period}", .finance),
        APIRoute(.post, "/v1/audit/periods/{period}/close", .finance),
        APIRoute(.post, "/v1/audit/periods/{period}/reopen", .finance),
        APIRoute(.get, "/v1/audit/adjustments", .finance),
        APIRoute(.get, "/v1/audit/metrics", .finance),
    ]

    /// The methods the routes of `path` take, in the list's order, a GET route's HEAD too (the
    /// server answers it as GET without the body); empty when no route has that path.
    static func methods(of path: String) -> [HTTPRequest.Method] {
        let methods = all.filter { $0.matches(path) }.map(\.method)
        return methods.contains(.get) ? methods + [.head] : methods
    }
}
