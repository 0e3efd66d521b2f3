import Foundation
import LedgerHTTP
import NIOHTTP1
import PostgresNIO
import Testing

@Suite struct IdempotencyTests {
    static let consumptions = "/v1/apps/\(APIHarness.app)/users/alice/consumptions"

    @Test func theSameKeyAndBodyGetTheFirstAnswerAndAnotherBodyIsRefused() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100", quantity: 5).receipt).status == 200)
            let body: [String: Any] = ["productId": "coins.100", "quantity": 2, "deviceId": "phone"]
            let key = [("Idempotency-Key", "consume-\(UUID().uuidString)")]

            let first = try await api.send(.POST, Self.consumptions, key: api.allKey, json: body, headers: key)
            #expect(first.status == 201, "\(first.text)")
            #expect(first.json["balance"] as? Int == 3)
            let retry = try await api.send(.POST, Self.consumptions, key: api.allKey, json: body, headers: key)
            #expect(retry.status == 201)
            #expect(retry.body == first.body)
            #expect(retry.headers.first(name: "Idempotent-Replayed") == "true")

            var other = body
            other["quantity"] = 1
            let reused = try await api.send(.POST, Self.consumptions, key: api.allKey, json: other, headers: key)
            #expect(reused.status == 422 && reused.errorCode == "idempotency_key_reused")

            // Without a key, the same body is a new command.
            let fresh = try await api.send(.POST, Self.consumptions, key: api.allKey, json: body)
            #expect(fresh.json["balance"] as? Int == 1)

            // A refusal is an answer too: replayed, not decided again.
            let overdrawKey = [("Idempotency-Key", "overdraw-\(UUID().uuidString)")]
            let overdraw: [String: Any] = ["productId": "coins.100", "quantity": 5, "deviceId": "phone"]
            let refused = try await api.send(.POST, Self.consumptions, key: api.allKey, json: overdraw, headers: overdrawKey)
            #expect(refused.status == 409 && refused.errorCode == "insufficient_balance")
            #expect((refused.json["error"] as? [String: Any])?["balance"] as? Int == 1)
            let refusedAgain = try await api.send(.POST, Self.consumptions, key: api.allKey, json: overdraw, headers: overdrawKey)
            #expect(refusedAgain.status == 409 && refusedAgain.body == refused.body)
        }
    }

    @Test func aRetryWhileTheFirstRequestRunsIsToldSo() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100", quantity: 5).receipt).status == 200)
            let key = "slow-\(UUID().uuidString)"
            let body: [String: Any] = ["productId": "coins.100", "quantity": 1, "deviceId": "phone"]
            let bodyData = try JSONSerialization.data(withJSONObject: body)
            // Claim the key as a first request that has not answered yet would.
            let store = IdempotencyProbe(api: api)
            try await store.claim(key: key, body: bodyData, path: Self.consumptions)
            let second = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: bodyData, headers: [("Idempotency-Key", key)])
            #expect(second.status == 409 && second.errorCode == "idempotency_in_progress", "\(second.text)")
        }
    }

    @Test func keysAreScopedToTheirApp() async throws {
        try await APIHarness.run { api in
            let store = IdempotencyProbe(api: api)
            let key = "shared-\(UUID().uuidString)"
            try await store.claim(key: key, body: Data(), path: "/elsewhere", app: "com.other.app")
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100").receipt).status == 200)
            let answer = try await api.send(.POST, Self.consumptions, key: api.allKey,
                                            json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"], headers: [("Idempotency-Key", key)])
            #expect(answer.status == 201, "\(answer.text)")
        }
    }
}

/// Claims an idempotency key directly, as a first request still running would have.
struct IdempotencyProbe {
    let api: APIHarness

    func claim(key: String, body: Data, path: String, app: String = APIHarness.app) async throws {
        var hasher = SHA256Probe()
        hasher.update("POST \(path)\n", body.isEmpty ? body : try JSONSerialization.data(
            withJSONObject: try JSONSerialization.jsonObject(with: body), options: [.sortedKeys]))
        _ = try await api.client.query(
            "INSERT INTO ledger.idempotency_keys (app, key, request_hash) VALUES (\(app), \(key), \(hasher.digest))"
        )
    }
}
