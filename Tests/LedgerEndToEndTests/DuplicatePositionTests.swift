import Foundation
import LedgerHTTP
import NIOHTTP1
import Testing

/// A write that records nothing new answers with where the fact it repeats is recorded, not with
/// wherever the log or the user's stream happens to be now.
@Suite struct DuplicatePositionTests {
    @Test func aRepeatedFinishNamesThePositionOfTheFirstFinish() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("level.pack", type: "non_consumable")
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "level.pack")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let finish = "/v1/apps/\(APIHarness.app)/transactions/\(bought.transactionId)/finish"
            let first = try await api.send(.POST, finish, key: api.keys["ingest"], json: ["deviceId": "phone"])
            let firstPosition = try #require(first.json["position"] as? Int)

            // Something else is recorded for the same user after the finish.
            let coins = try await api.buy("alice", "coins.100")
            let later = try await api.ingest("alice", device: "phone", receipt: coins.receipt)
            #expect(try #require(later.json["position"] as? Int) > firstPosition)

            let again = try await api.send(.POST, finish, key: api.keys["ingest"], json: ["deviceId": "phone"])
            #expect(again.json["duplicate"] as? Bool == true)
            #expect(again.json["position"] as? Int == firstPosition, "\(again.text)")
        }
    }

    @Test func aReceiptPostedAgainNamesWhereItsTransactionsAre() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("bob", "coins.100", quantity: 2)
            let first = try await api.ingest("bob", device: "phone", receipt: bought.receipt)
            let recorded = first.json["recorded"] as? [[String: Any]] ?? []
            let purchasePosition = try #require(recorded.first { $0["kind"] as? String == "purchase" }?["position"] as? Int)

            let failed = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/failures", key: api.keys["ingest"], json: [
                "userId": "bob", "deviceId": "phone", "productId": "coins.100", "errorCode": "SKErrorPaymentCancelled", "cancelled": true,
            ])
            #expect(try #require(failed.json["position"] as? Int) > purchasePosition)

            let again = try await api.ingest("bob", device: "phone", receipt: bought.receipt)
            #expect((again.json["recorded"] as? [Any])?.isEmpty == true)
            #expect(again.json["position"] as? Int == purchasePosition, "\(again.text)")
        }
    }

    @Test func aProductDefinedAgainUnchangedNamesWhereItsDefinitionIs() async throws {
        try await APIHarness.run { api in
            let path = "/v1/apps/\(APIHarness.app)/products/gems"
            let body: [String: Any] = ["type": "consumable", "prices": ["USD": "1.99"]]
            let first = try await api.send(.PUT, path, key: api.keys["admin"], json: body)
            let firstPosition = try #require(first.json["position"] as? Int)
            let other = try await api.send(.PUT, "/v1/apps/\(APIHarness.app)/products/rubies", key: api.keys["admin"], json: body)
            #expect(try #require(other.json["position"] as? Int) > firstPosition)

            let again = try await api.send(.PUT, path, key: api.keys["admin"], json: body)
            #expect(again.json["changed"] as? Bool == false)
            #expect(again.json["position"] as? Int == firstPosition, "\(again.text)")
        }
    }
}
