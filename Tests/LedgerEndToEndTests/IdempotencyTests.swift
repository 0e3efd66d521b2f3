import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
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

    @Test func aRetryOfARequestThatDiedBeforeAppendingRunsAtOnce() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100", quantity: 5).receipt).status == 200)
            let key = "died-\(UUID().uuidString)"
            let body: [String: Any] = ["productId": "coins.100", "quantity": 1, "deviceId": "phone"]
            let bodyData = try JSONSerialization.data(withJSONObject: body)
            // The key noted as a first request does before it runs, which then died: no wait, no 409.
            try await IdempotencyProbe(api: api).claim(key: key, body: bodyData, path: Self.consumptions)
            let retry = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: bodyData, headers: [("Idempotency-Key", key)])
            #expect(retry.status == 201 && retry.json["balance"] as? Int == 4, "\(retry.text)")
            #expect(try await consumptions(api) == 1)
        }
    }

    @Test func aCommandAppendedWhoseAnswerWasLostIsAnsweredFromTheLogAndNotRepeated() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100", quantity: 5).receipt).status == 200)
            let key = "lost-\(UUID().uuidString)"
            let body: [String: Any] = ["productId": "coins.100", "quantity": 2, "deviceId": "phone"]
            let bodyData = try JSONSerialization.data(withJSONObject: body)
            // What a server does before it dies between the append and the answer: the key noted,
            // the consumption appended under the command's key, no answer kept.
            try await IdempotencyProbe(api: api).claim(key: key, body: bodyData, path: Self.consumptions)
            let handler = UserCommandHandler(store: PostgresEventStore(client: api.client, logger: APIHarness.logger), logger: APIHarness.logger)
            let commandKey = try DeduplicationKey.command(app: APIHarness.app, idempotencyKey: key) { $0 }
            let first = try await handler.execute(app: APIHarness.app, user: "alice", commandKey: commandKey) { state, catalog in
                (try UserDecisions.consume(productId: "coins.100", quantity: 2, deviceId: "phone", catalog: catalog, on: state), ())
            }
            let recordedAt = try #require(first.append?.position)
            // Another consumption after it: the retry's answer is still the first run's.
            let other = try await api.send(.POST, Self.consumptions, key: api.allKey, json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(other.json["balance"] as? Int == 2)

            let retry = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: bodyData, headers: [("Idempotency-Key", key)])
            #expect(retry.status == 201, "\(retry.text)")
            #expect(retry.json["position"] as? Int == Int(recordedAt), "the position of the first run's append")
            #expect(retry.json["balance"] as? Int == 3, "the balance right after the first run")
            #expect(try await consumptions(api) == 2, "one for the keyed command, one for the other")
            let again = try await api.send(.POST, Self.consumptions, key: api.allKey, raw: bodyData, headers: [("Idempotency-Key", key)])
            #expect(again.body == retry.body && again.headers.first(name: "Idempotent-Replayed") == "true")
        }
    }

    @Test func twinsSentAtOnceConsumeOnce() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            #expect(try await api.ingest("alice", device: "phone", receipt: try await api.buy("alice", "coins.100", quantity: 10).receipt).status == 200)
            let headers = [("Idempotency-Key", "twins-\(UUID().uuidString)")]
            let body = try JSONSerialization.data(withJSONObject: ["productId": "coins.100", "quantity": 3, "deviceId": "phone"])
            let answers = try await withThrowingTaskGroup(of: APIHarness.Answer.self) { group in
                for _ in 0..<16 { group.addTask { try await api.send(.POST, Self.consumptions, key: api.allKey, raw: body, headers: headers) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 201 }, "\(answers.map(\.text))")
            #expect(Set(answers.compactMap { $0.json["position"] as? Int }).count == 1, "one append, one position")
            #expect(answers.allSatisfy { $0.json["balance"] as? Int == 7 })
            #expect(try await consumptions(api) == 1)
        }
    }

    /// Consumptions recorded in the test's log.
    private func consumptions(_ api: APIHarness) async throws -> Int {
        try await api.client.query("SELECT count(*) FROM ledger.events WHERE event_type LIKE 'ItemConsumed%'").collect()[0].decode(Int.self)
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
