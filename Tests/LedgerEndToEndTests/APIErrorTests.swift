import Foundation
import LedgerHTTP
import LedgerStore
import NIOHTTP1
import PostgresNIO
import Testing

/// Bad input gets a clear error naming what was wrong, and nothing is recorded.
@Suite struct APIErrorTests {
    static let consumptions = "/v1/apps/\(APIHarness.app)/users/alice/consumptions"

    /// The log's head: nothing recorded means it does not move.
    static func head(_ api: APIHarness) async throws -> Int64 {
        let rows = try await api.client.query("SELECT coalesce(max(position), 0) FROM ledger.events")
        for try await head in rows.decode(Int64.self) { return head }
        return 0
    }

    @Test func malformedAndMistypedBodiesAreRefusedAndRecordNothing() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 2)
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let before = try await Self.head(api)

            let broken = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: Data("{\"productId\": ".utf8))
            #expect(broken.status == 400 && broken.errorCode == "invalid_json", "\(broken.text)")

            let empty = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: Data())
            #expect(empty.status == 400 && empty.errorCode == "invalid_json")

            let array = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: Data("[1, 2]".utf8))
            #expect(array.status == 400 && array.errorMessage?.contains("JSON object") == true, "\(array.text)")

            let mistyped = try await api.send(.POST, Self.consumptions, key: api.allKey,
                                              json: ["productId": "coins.100", "quantity": "two", "deviceId": "phone"])
            #expect(mistyped.status == 400 && mistyped.errorCode == "invalid_request")
            #expect(mistyped.errorMessage?.contains("quantity") == true, "\(mistyped.text)")

            let missing = try await api.send(.POST, Self.consumptions, key: api.allKey, json: ["productId": "coins.100", "quantity": 1])
            #expect(missing.status == 400 && missing.errorMessage?.contains("deviceId") == true, "\(missing.text)")

            let zero = try await api.send(.POST, Self.consumptions, key: api.allKey, json: ["productId": "coins.100", "quantity": 0, "deviceId": "phone"])
            #expect(zero.status == 400 && zero.errorMessage?.contains("quantity") == true)

            let longDevice = String(repeating: "d", count: 300)
            let tooLong = try await api.send(.POST, Self.consumptions, key: api.allKey, json: ["productId": "coins.100", "quantity": 1, "deviceId": longDevice])
            #expect(tooLong.status == 400 && tooLong.errorMessage?.contains("deviceId") == true)

            let unknownProduct = try await api.send(.POST, Self.consumptions, key: api.allKey, json: ["productId": "gems.5", "quantity": 1, "deviceId": "phone"])
            #expect(unknownProduct.status == 404 && unknownProduct.errorCode == "unknown_product", "\(unknownProduct.text)")

            let unknownUser = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/nobody/consumptions", key: api.allKey,
                                                 json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(unknownUser.status == 404 && unknownUser.errorCode == "unknown_user")

            let huge = Data(("{\"productId\":\"" + String(repeating: "x", count: 100_000) + "\"}").utf8)
            let oversized = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: huge)
            #expect(oversized.status == 413 && oversized.errorCode == "body_too_large", "\(oversized.status) \(oversized.text)")

            let badReceipt = try await api.ingest("alice", device: "phone", receipt: "not base64 at all!!")
            #expect(badReceipt.status == 400 && badReceipt.errorCode == "invalid_request")

            let tampered = try await api.ingest("alice", device: "phone", receipt: Data("forged receipt".utf8).base64EncodedString())
            #expect(tampered.status == 422 && tampered.errorCode == "invalid_receipt", "\(tampered.text)")
            #expect((tampered.json["error"] as? [String: Any])?["status"] as? Int != nil)

            let priceWithoutCurrency = try await api.ingest("alice", device: "phone", receipt: bought.receipt, price: "0.99")
            #expect(priceWithoutCurrency.status == 400)

            let badProductType = try await api.send(.PUT, "/v1/apps/\(APIHarness.app)/products/gems", key: api.allKey, json: ["type": "gem"])
            #expect(badProductType.status == 400 && badProductType.errorMessage?.contains("consumable") == true)
            let noDuration = try await api.send(.PUT, "/v1/apps/\(APIHarness.app)/products/pro", key: api.allKey, json: ["type": "auto_renewable"])
            #expect(noDuration.status == 400 && noDuration.errorMessage?.contains("duration") == true)

            let unknownRoute = try await api.send(.GET, "/v1/nothing", key: api.allKey)
            #expect(unknownRoute.status == 404 && unknownRoute.errorCode == "not_found")
            #expect(unknownRoute.headers.first(name: "X-Request-Id") != nil)

            let spacedUser = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/a%20b/entitlements", key: api.allKey)
            #expect(spacedUser.status == 400 && spacedUser.errorMessage?.contains("userId") == true, "\(spacedUser.text)")

            let unknownUserRead = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/nobody/entitlements", key: api.allKey)
            #expect(unknownUserRead.status == 404 && unknownUserRead.errorCode == "unknown_user")

            let unknownTransaction = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/transactions/999/finish", key: api.allKey, json: ["deviceId": "phone"])
            #expect(unknownTransaction.status == 404 && unknownTransaction.errorCode == "unknown_transaction")

            let badMinPosition = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/balances?minPosition=soon", key: api.allKey)
            #expect(badMinPosition.status == 400 && badMinPosition.errorMessage?.contains("minPosition") == true)

            #expect(try await Self.head(api) == before)
        }
    }

    @Test func theAppStoreBeingDownAnswers503RetryableAndTheSamePostLaterSucceeds() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            let before = try await Self.head(api)
            _ = try await api.simulator(.PUT, "/admin/faults", ["failNext": 1, "failStatus": 21005])
            let down = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(down.status == 503 && down.errorCode == "appstore_unavailable", "\(down.text)")
            #expect((down.json["error"] as? [String: Any])?["retryable"] as? Bool == true)
            #expect(down.headers.first(name: "Retry-After") != nil)
            #expect(try await Self.head(api) == before)

            let later = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(later.status == 200)
            #expect((later.json["recorded"] as? [[String: Any]])?.contains { $0["kind"] as? String == "purchase" } == true)
        }
    }

    @Test func aReceiptOfAnotherAppIsRefusedAndRecordsNothing() async throws {
        try await APIHarness.run { api in
            _ = try await api.simulator(.PUT, "/admin/apps/com.other.app", [:])
            _ = try await api.simulator(.PUT, "/admin/apps/com.other.app/products/coins.100", ["type": "consumable"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "alice"])
            let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "alice", "bundleId": "com.other.app", "productId": "coins.100"])
            let receipt = try #require(bought.json["receipt"] as? String)
            let before = try await Self.head(api)
            let answer = try await api.ingest("alice", device: "phone", receipt: receipt)
            #expect(answer.status == 422 && answer.errorCode == "receipt_of_another_app", "\(answer.text)")
            #expect(try await Self.head(api) == before)
        }
    }

    @Test func aReadThatCannotCatchUpAnswers503WithThePositionReached() async throws {
        try await APIHarness.run(readWait: .milliseconds(200)) { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let behind = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/entitlements?minPosition=999999999", key: api.allKey)
            #expect(behind.status == 503 && behind.errorCode == "projections_behind", "\(behind.text)")
            #expect((behind.json["error"] as? [String: Any])?["position"] as? Int != nil)
        }
    }

    /// A read that reaches a ledger before its projections exist (first start on a new database)
    /// is told to retry, not answered with a 500 about a missing view; once they are set up, the
    /// same read is answered.
    @Test func aReadBeforeTheProjectionsAreSetUpIsToldToRetry() async throws {
        try await APIHarness.run(readWait: .milliseconds(200), runProjections: false) { api in
            for route in ["entitlements", "balances", "subscriptions", "entitlements?minPosition=0"] {
                let early = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/nobody/\(route)", key: api.allKey)
                #expect(early.status == 503 && early.errorCode == "projections_behind", "\(route): \(early.text)")
                #expect(early.headers.first(name: "Retry-After") != nil)
                #expect((early.json["error"] as? [String: Any])?["retryable"] as? Bool == true)
                #expect(early.errorMessage?.contains("being set up") == true, "\(early.text)")
            }
            try await ProjectionRunner(client: api.client, listenConfiguration: nil, logger: APIHarness.logger).prepare()
            let ready = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/nobody/entitlements", key: api.allKey)
            #expect(ready.status == 404 && ready.errorCode == "unknown_user", "\(ready.text)")
        }
    }
}
