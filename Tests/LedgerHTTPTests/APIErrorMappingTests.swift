import AppStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LedgerApplication
import LedgerDomain
@testable import LedgerHTTP
import LedgerStore
import NIOCore
import Testing

/// Every error a handler can meet, thrown by a fake route, answers with the status and code the
/// API documents: the error mapping and the middleware alone, no database.
@Suite("Errors become the API's answers in one place")
struct APIErrorMappingTests {
    struct Unexpected: Error {}

    /// What each fake route throws, and what the caller must see.
    static let cases: [(route: String, error: any Error & Sendable, status: Int, code: String)] = [
        ("balance", DecisionError.insufficientBalance(productId: "coins", balance: 2, requested: 3), 409, "insufficient_balance"),
        ("revoked", DecisionError.alreadyRevoked("1"), 409, "already_revoked"),
        ("transaction", DecisionError.unknownTransaction("1"), 404, "unknown_transaction"),
        ("consumable", DecisionError.notConsumable(productId: "levels", type: .nonConsumable), 422, "not_consumable"),
        ("quantity", DecisionError.invalidQuantity(0), 400, "invalid_request"),
        ("owner", CommandError.ownedByAnotherUser(position: 12), 409, "owned_by_another_user"),
        ("input", LedgerInputError.invalidStreamID("user x"), 400, "invalid_request"),
        ("behind", ReadError.projectionsBehind(requested: 9, reached: 7), 503, "projections_behind"),
        ("cursor", AuditQueryError.invalidCursor("it was cut"), 400, "invalid_cursor"),
        ("trail", AuditQueryError.notReady, 503, "projections_behind"),
        ("receipt", ReceiptVerificationError.invalidReceipt(ReceiptStatus(code: 21003), environment: .production), 422, "invalid_receipt"),
        ("appstore", ReceiptVerificationError.unavailable("no route to the App Store"), 503, "appstore_unavailable"),
        ("garbled", ReceiptVerificationError.malformedResponse("no status"), 503, "appstore_bad_response"),
        ("app", AccessError.unknownApp("com.example.gone"), 404, "not_found"),
        ("order", AppStoreQueryError(.orderNotFound, "Apple knows no order M1"), 404, "order_not_found"),
        ("nokey", AppStoreQueryError(.noServerAPIKey, "no key"), 409, "no_server_api_key"),
        ("applerefused", AppStoreQueryError(.appStoreRefused, "HTTP 401"), 502, "appstore_refused"),
        ("appleslow", AppStoreQueryError(.appStoreRateLimited, "429"), 503, "appstore_rate_limited"),
        ("appleaway", AppStoreQueryError(.appStoreUnavailable, "no answer"), 503, "appstore_unavailable"),
        ("database", StoreError.databaseUnavailable("cannot reach PostgreSQL at 127.0.0.1:5432"), 503, "database_unavailable"),
        ("shutdown", CancellationError(), 503, "shutting_down"),
        ("unexpected", Unexpected(), 500, "internal_error"),
    ]

    /// The `error` object of an answer's JSON body.
    static func errorObject(_ response: TestResponse) -> [String: Any]? {
        let body = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
        return body?["error"] as? [String: Any]
    }

    func application() -> some ApplicationProtocol {
        let router = Router(context: LedgerRequestContext.self)
        router.middlewares.add(RequestIDMiddleware())
        router.middlewares.add(ErrorMiddleware())
        for item in Self.cases {
            let error = item.error
            router.get("/fake/\(item.route)") { _, _ -> String in throw error }
        }
        return Application(router: router)
    }

    @Test("each error type answers with its documented status and code, and a request id")
    func statusesAndCodes() async throws {
        try await application().test(.router) { client in
            for item in Self.cases {
                try await client.execute(uri: "/fake/\(item.route)", method: .get) { response in
                    #expect(Int(response.status.code) == item.status, "\(item.route)")
                    let error = Self.errorObject(response)
                    #expect(error?["code"] as? String == item.code, "\(item.route): \(String(buffer: response.body))")
                    #expect((error?["requestId"] as? String)?.isEmpty == false)
                }
            }
        }
    }

    @Test("refusals carry what the caller acts on: the balance, the position, the App Store status, the field, Retry-After")
    func details() async throws {
        try await application().test(.router) { client in
            try await client.execute(uri: "/fake/balance", method: .get) { response in
                let error = try #require(Self.errorObject(response))
                #expect(error["balance"] as? Int == 2)
            }
            try await client.execute(uri: "/fake/owner", method: .get) { response in
                let error = try #require(Self.errorObject(response))
                #expect(error["position"] as? Int == 12)
            }
            try await client.execute(uri: "/fake/receipt", method: .get) { response in
                let error = try #require(Self.errorObject(response))
                #expect(error["status"] as? Int == 21003)
            }
            try await client.execute(uri: "/fake/cursor", method: .get) { response in
                let error = try #require(Self.errorObject(response))
                #expect(error["field"] as? String == "cursor")
            }
            for route in ["behind", "appstore", "shutdown"] {
                try await client.execute(uri: "/fake/\(route)", method: .get) { response in
                    #expect(response.headers[.retryAfter] != nil, "\(route)")
                    let error = try #require(Self.errorObject(response))
                    #expect(error["retryable"] as? Bool == true, "\(route)")
                }
            }
        }
    }

    @Test("an unexpected error's answer names only the request id, never the error")
    func unexpectedLeaksNothing() async throws {
        try await application().test(.router) { client in
            try await client.execute(uri: "/fake/unexpected", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(!text.contains("Unexpected"))
                #expect(text.contains("request id"))
            }
            try await client.execute(uri: "/fake/database", method: .get) { response in
                #expect(!String(buffer: response.body).contains("5432"), "the database's address stays in the logs")
            }
            try await client.execute(uri: "/no/such/route", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(String(buffer: response.body).contains("/openapi.json"))
            }
        }
    }

    @Test("a route's path with a method it does not take answers 405 with the methods it takes; other paths 404")
    func wrongMethods() async throws {
        try await application().test(.router) { client in
            for (method, path, allowed) in [
                (HTTPRequest.Method.delete, "/v1/apps/com.example.app/users/alice/entitlements", "GET, HEAD"),
                (.get, "/v1/apps/com.example.app/receipts", "POST"),
                (.post, "/health", "GET, HEAD"),
            ] {
                try await client.execute(uri: path, method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method) \(path)")
                    #expect(response.headers[.allow] == allowed, "\(method) \(path)")
                    let error = Self.errorObject(response)
                    #expect(error?["code"] as? String == "method_not_allowed")
                    #expect((error?["message"] as? String)?.contains("takes \(allowed), not \(method.rawValue)") == true, "\(String(buffer: response.body))")
                }
            }
            // A segment left empty, or one too many, is no route of any method.
            for path in ["/v1/apps/com.example.app/users//entitlements", "/v1/apps/com.example.app/receipts/extra"] {
                try await client.execute(uri: path, method: .delete) { response in
                    #expect(response.status == .notFound, "\(path)")
                    #expect(response.headers[.allow] == nil)
                }
            }
        }
    }
}
