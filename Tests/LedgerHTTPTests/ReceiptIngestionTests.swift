import Foundation
import LedgerHTTP
import NIOHTTP1
import Testing

@Suite struct ReceiptIngestionTests {
    @Test func aConsumableReceiptIsRecordedOnceAndItsBalanceReadBack() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 3)

            let first = try await api.ingest("alice", device: "phone", receipt: bought.receipt, price: "0.99", currency: "USD")
            #expect(first.status == 200, "\(first.text)")
            let recorded = first.json["recorded"] as? [[String: Any]] ?? []
            #expect(recorded.map { $0["kind"] as? String } == ["device", "purchase"])
            #expect(recorded.last?["transactionId"] as? String == bought.transactionId)
            let position = try #require(first.json["position"] as? Int)
            let consumables = (first.json["entitlements"] as? [String: Any])?["consumables"] as? [[String: Any]]
            #expect(consumables?.first?["balance"] as? Int == 3)

            let again = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(again.status == 200)
            #expect((again.json["recorded"] as? [Any])?.isEmpty == true)
            let duplicates = again.json["duplicates"] as? [[String: Any]] ?? []
            #expect(duplicates.first?["transactionId"] as? String == bought.transactionId)
            #expect(again.json["position"] as? Int == position)

            let balances = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/balances?minPosition=\(position)", key: api.keys["read"])
            #expect(balances.status == 200, "\(balances.text)")
            let rows = balances.json["balances"] as? [[String: Any]] ?? []
            #expect(rows.first?["balance"] as? Int == 3)
            #expect((balances.json["position"] as? Int ?? 0) >= position)
        }
    }
}
