import Foundation
import Hummingbird
import LedgerApplication
import LedgerHTTP
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// Every scoped route, for every key: no key and a bad key get 401, a key without the route's
/// scope 403, a key of another app 404 on app routes; the right key gets past authorization.
@Suite struct AuthorizationTests {
    /// A concrete request for each route of the table (path parameters filled in).
    static func concretePath(_ route: APIRoute, app: String) -> String {
        route.path
            .replacingOccurrences(of: "{bundleId}", with: app)
            .replacingOccurrences(of: "{productId}", with: "coins.100")
            .replacingOccurrences(of: "{transactionId}", with: "1000000000000001")
            .replacingOccurrences(of: "{userId}", with: "alice")
            .replacingOccurrences(of: "{deviceId}", with: "phone")
    }

    @Test func theKeyScopeAndAppMatrixHoldsForEveryRoute() async throws {
        try await APIHarness.run { api in
            let registry = AppRegistry(client: api.client, logger: APIHarness.logger)
            try await registry.addApp("com.other.app", sharedSecret: nil)
            let otherAppKey = try await registry.createKey(app: "com.other.app", scopes: Set(APIScope.allCases)).token
            let revoked = try await registry.createKey(app: APIHarness.app, scopes: Set(APIScope.allCases))
            try await registry.revokeKey(revoked.key.keyId)

            for route in APIRoutes.all {
                let method = HTTPMethod(rawValue: route.method.rawValue)
                let path = Self.concretePath(route, app: APIHarness.app)
                guard let scope = route.scope else {
                    if route.anyKey {
                        for (label, key) in [("no key", nil), ("garbage", "lk_nope"), ("revoked", revoked.token)] as [(String, String?)] {
                            let answer = try await api.send(method, path, key: key)
                            #expect(answer.status == 401 && answer.errorCode == "unauthorized", "\(route) with \(label): \(answer.status) \(answer.text)")
                        }
                        for scope in APIScope.allCases {
                            let answer = try await api.send(method, path, key: api.keys[scope.rawValue])
                            #expect(answer.status == 200 && answer.json["scopes"] as? [String] == [scope.rawValue], "\(route) with a \(scope) key: \(answer.text)")
                            #expect(answer.json["app"] as? String == APIHarness.app)
                        }
                        let foreign = try await api.send(method, path, key: otherAppKey)
                        #expect(foreign.json["app"] as? String == "com.other.app", "a key describes its own app only: \(foreign.text)")
                        continue
                    }
                    if route.signed {
                        // No key is asked for, and none helps: an unsigned body is refused as not Apple's.
                        for key in [nil, api.allKey] {
                            let unsigned = try await api.send(method, path, key: key, json: ["signedPayload": "a.b.c"])
                            #expect(unsigned.status == 401 && unsigned.errorCode == "invalid_signature", "\(route): \(unsigned.text)")
                        }
                        continue
                    }
                    if route.path == "/metrics" {
                        // Not for strangers: only the bearer of the operator's metrics token (none here), never an API key.
                        for key in [nil, api.allKey] {
                            let refused = try await api.send(method, path, key: key)
                            #expect(refused.status == 403 && refused.errorCode == "metrics_not_exposed", "\(route): \(refused.text)")
                        }
                        continue
                    }
                    let open = try await api.send(method, path, key: nil)
                    #expect(open.status == 200, "\(route) without a key: \(open.status)")
                    let head = try await api.send(.HEAD, path, key: nil)
                    #expect(head.status == 200 && head.text.isEmpty, "HEAD \(route.path): \(head.status)")
                    continue
                }
                for (label, key) in [("no key", nil), ("garbage", "lk_nope"), ("revoked", revoked.token)] as [(String, String?)] {
                    let answer = try await api.send(method, path, key: key, json: [String: Any]())
                    #expect(answer.status == 401 && answer.errorCode == "unauthorized", "\(route) with \(label): \(answer.status) \(answer.text)")
                }
                for other in APIScope.allCases.map(\.rawValue) where other != scope.rawValue {
                    let answer = try await api.send(method, path, key: api.keys[other], json: [String: Any]())
                    #expect(answer.status == 403 && answer.errorCode == "forbidden", "\(route) with a \(other) key: \(answer.status) \(answer.text)")
                }
                let right = try await api.send(method, path, key: api.keys[scope.rawValue], json: [String: Any]())
                #expect(![401, 403].contains(right.status), "\(route) with its own scope: \(right.status) \(right.text)")
                if route.method == .get {
                    // HEAD is GET without the body, behind the same key checks.
                    let anonymous = try await api.send(.HEAD, path, key: nil)
                    #expect(anonymous.status == 401 && anonymous.text.isEmpty, "HEAD \(route.path) without a key: \(anonymous.status)")
                    let head = try await api.send(.HEAD, path, key: api.keys[scope.rawValue])
                    #expect(head.status == right.status && head.text.isEmpty, "HEAD \(route.path): \(head.status) against \(right.status)")
                }
                if route.path.hasPrefix("/v1/apps/") {
                    let foreign = try await api.send(method, path, key: otherAppKey, json: [String: Any]())
                    #expect(foreign.status == 404 && foreign.errorCode == "not_found", "\(route) with another app's key: \(foreign.status) \(foreign.text)")
                    #expect(!foreign.text.contains("alice"))
                }
            }
        }
    }

    @Test func financeKeysOfOneAppNeverSeeAnotherAppsAuditRows() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            let ingested = try await api.ingest("alice", device: "phone", receipt: bought.receipt, price: "0.99", currency: "USD")
            #expect(ingested.status == 200)
            let position = ingested.json["position"] as? Int ?? 0
            _ = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/balances?minPosition=\(position)", key: api.allKey)

            let registry = AppRegistry(client: api.client, logger: APIHarness.logger)
            try await registry.addApp("com.other.app", sharedSecret: nil)
            let otherFinance = try await registry.createKey(app: "com.other.app", scopes: [.finance]).token

            let financeKey = api.keys["finance"]
            #expect(try await eventually {
                let mine = try await api.send(.GET, "/v1/audit/events?environment=sandbox&limit=1", key: financeKey)
                return (mine.json["events"] as? [Any])?.count == 1
            })
            let theirs = try await api.send(.GET, "/v1/audit/events?environment=sandbox", key: otherFinance)
            #expect(theirs.status == 200)
            #expect((theirs.json["events"] as? [Any])?.isEmpty == true)
            let summary = try await api.send(.GET, "/v1/audit/summary?environment=sandbox", key: otherFinance)
            #expect((summary.json["rows"] as? [Any])?.isEmpty == true)

            // A cursor issued to one app is refused for another, without naming the first.
            _ = try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100").receipt)
            #expect(try await eventually {
                try await api.send(.GET, "/v1/audit/events?environment=sandbox&limit=1", key: financeKey).json["nextCursor"] is String
            })
            let page = try await api.send(.GET, "/v1/audit/events?environment=sandbox&limit=1", key: financeKey)
            let cursor = try #require(page.json["nextCursor"] as? String)
            let next = try await api.send(.GET, "/v1/audit/events?environment=sandbox&limit=1&cursor=\(cursor)", key: financeKey)
            #expect((next.json["events"] as? [Any])?.count == 1)
            let stolen = try await api.send(.GET, "/v1/audit/events?environment=sandbox&cursor=\(cursor)", key: otherFinance)
            #expect(stolen.status == 400 && stolen.errorCode == "invalid_cursor")
            #expect(!stolen.text.contains(APIHarness.app))
            // Finance is read-only: it cannot write anywhere.
            let write = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/alice/consumptions", key: api.keys["finance"],
                                           json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(write.status == 403)
        }
    }
}
