import Foundation
import LedgerDomain
import LedgerHTTP
import LedgerStore
import NIOHTTP1
import PostgresNIO
import Testing

@Suite struct ReceiptIngestionTests {
    @Test func aConsumableReceiptIsRecordedOnceAndItsBalanceReadBack() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 3)

            let first = try await api.ingest("alice", device: "phone", receipt: bought.receipt, price: "0.99", currency: "USD")
            #expect(first.status == 200, "\(first.text)")
            let recorded = first.json["recorded"] as? [[String: Any]] ?? []
            #expect(recorded.map { $0["kind"] as? String } == ["receipt", "purchase"])
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

    @Test func oneReceiptPosted50TimesAtOnceIsRecordedOnce() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 2)
            let answers = try await withThrowingTaskGroup(of: APIHarness.Answer.self) { group in
                for _ in 0..<50 { group.addTask { try await api.ingest("alice", device: "phone", receipt: bought.receipt) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 200 }, "\(answers.map(\.status))")
            let purchases = answers.flatMap { ($0.json["recorded"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "purchase" } }
            #expect(purchases.count == 1)
            let positions = Set(answers.compactMap { $0.json["position"] as? Int })
            #expect(positions.count == 1, "every caller learns the one position: \(positions)")
            let rows = try await api.client.query(
                "SELECT count(*) FROM ledger.events WHERE event_type = 'AppStoreTransactionObserved.v1'"
            )
            for try await count in rows.decode(Int64.self) { #expect(count == 1) }
            // Every answer reports the balance the one purchase gave.
            #expect(answers.allSatisfy {
                (($0.json["entitlements"] as? [String: Any])?["consumables"] as? [[String: Any]])?.first?["balance"] as? Int == 2
            })
        }
    }

    @Test func aTransactionBelongsToTheFirstUserWhoPostedIt() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let mallory = try await api.ingest("mallory", device: "laptop", receipt: bought.receipt)
            #expect(mallory.status == 200, "\(mallory.text)")
            #expect((mallory.json["recorded"] as? [Any])?.isEmpty == true)
            let notRecorded = mallory.json["notRecorded"] as? [[String: Any]] ?? []
            #expect(notRecorded.map { $0["transactionId"] as? String } == [bought.transactionId])
            #expect(notRecorded.first?["reason"] as? String == "held_by_another_user")
            #expect(!mallory.text.contains("alice"))
            let history = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/mallory/history", key: api.allKey)
            #expect(history.status == 404)
        }
    }

    @Test func finishFailureRevokeAndHistoryAreRecordedInOrder() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("level.pack", type: "non_consumable")
            let bought = try await api.buy("alice", "level.pack")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let finish = "/v1/apps/\(APIHarness.app)/transactions/\(bought.transactionId)/finish"
            let finished = try await api.send(.POST, finish, key: api.keys["ingest"], json: ["deviceId": "phone"])
            #expect(finished.status == 200 && finished.json["duplicate"] as? Bool == false, "\(finished.text)")
            let again = try await api.send(.POST, finish, key: api.keys["ingest"], json: ["deviceId": "phone"])
            #expect(again.json["duplicate"] as? Bool == true && again.json["position"] as? Int == finished.json["position"] as? Int)

            let failed = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/failures", key: api.keys["ingest"], json: [
                "userId": "alice", "deviceId": "phone", "productId": "level.pack2", "errorCode": "SKErrorPaymentCancelled", "cancelled": true,
            ])
            #expect(failed.status == 201, "\(failed.text)")

            let revoke = "/v1/apps/\(APIHarness.app)/transactions/\(bought.transactionId)/revoke"
            let noReason = try await api.send(.POST, revoke, key: api.keys["admin"], json: ["reason": " "])
            #expect(noReason.status == 400)
            // Dated before the purchase: refused, nothing recorded.
            let early = try await api.send(.POST, revoke, key: api.keys["admin"], json: ["reason": "chargeback", "revokedAt": "2019-01-01T10:00:00Z"])
            #expect(early.status == 400 && early.errorMessage?.contains("before") == true, "\(early.text)")
            let revokedAt = LedgerJSON.formatTimestamp(Date(milliseconds: Date().addingTimeInterval(60).milliseconds))
            let revoked = try await api.send(.POST, revoke, key: api.keys["admin"], json: ["reason": "chargeback", "revokedAt": revokedAt])
            #expect(revoked.status == 200 && revoked.json["revokedAt"] as? String == revokedAt, "\(revoked.text)")
            let twice = try await api.send(.POST, revoke, key: api.keys["admin"], json: ["reason": "chargeback"])
            #expect(twice.status == 409 && twice.errorCode == "already_revoked")

            let position = revoked.json["position"] as? Int ?? 0
            let entitlements = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/entitlements?minPosition=\(position)", key: api.keys["read"])
            #expect((entitlements.json["owned"] as? [Any])?.isEmpty == true, "\(entitlements.text)")

            let history = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/history?limit=3", key: api.keys["read"])
            let types = (history.json["events"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
            #expect(types == ["ReceiptPosted.v1", "AppStoreTransactionObserved.v1", "TransactionFinished.v1"])
            #expect(history.json["nextFromVersion"] as? Int == 4)
            let rest = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/history?fromVersion=4", key: api.keys["read"])
            let restTypes = (rest.json["events"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
            #expect(restTypes == ["PurchaseFailed.v1", "PurchaseRevoked.v1"])
            let data = (rest.json["events"] as? [[String: Any]])?.last?["data"] as? [String: Any]
            #expect(data?["reason"] as? String == "chargeback")
        }
    }

    @Test func theCatalogIsServedWithValidatorsAndAnswers304WhenUnchanged() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let path = "/v1/apps/\(APIHarness.app)/products"
            let first = try await api.send(.GET, path, key: api.keys["read"])
            #expect(first.status == 200)
            let etag = try #require(first.headers.first(name: "ETag"))
            let modified = try #require(first.headers.first(name: "Last-Modified"))
            #expect((first.json["products"] as? [[String: Any]])?.first?["productId"] as? String == "coins.100")
            #expect(try await api.send(.GET, path, key: api.keys["read"], headers: [("If-None-Match", etag)]).status == 304)
            #expect(try await api.send(.GET, path, key: api.keys["read"], headers: [("If-Modified-Since", modified)]).status == 304)

            let same = try await api.send(.PUT, "\(path)/coins.100", key: api.keys["admin"], json: ["type": "consumable", "prices": ["USD": "0.99"]])
            #expect(same.json["changed"] as? Bool == false)
            let changed = try await api.send(.PUT, "\(path)/coins.100", key: api.keys["admin"], json: ["type": "consumable", "prices": ["USD": "1.99"]])
            #expect(changed.json["changed"] as? Bool == true)
            let after = try await api.send(.GET, path, key: api.keys["read"], headers: [("If-None-Match", etag)])
            #expect(after.status == 200 && after.headers.first(name: "ETag") != etag)
        }
    }
}
