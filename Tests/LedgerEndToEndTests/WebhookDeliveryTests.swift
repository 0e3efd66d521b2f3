import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerRuntime
import LedgerStore
import LedgerTesting
import Logging
import PostgresNIO
import Synchronization
import Testing

/// Signed webhooks against a real PostgreSQL and an endpoint on 127.0.0.1 that the test scripts:
/// every change arrives signed, in order per user, retried, parked and resent; redirects are not
/// followed; a dead endpoint holds up no other.
@Suite("Webhook deliveries")
struct WebhookDeliveryTests {
    static let app = "com.example.hooks"
    static let logger = TestDatabase.logger

    /// Quick retries for tests: `count` waits of 50 ms, no jitter.
    static func schedule(_ count: Int) -> WebhookRetrySchedule {
        WebhookRetrySchedule(delays: Array(repeating: .milliseconds(50), count: count), jitter: 0)
    }

    /// A change as the change writer writes it: one row per change and its position moved, in one
    /// transaction, as the database's owner.
    static func write(_ changes: [(user: String, position: Int64, seq: Int, type: String)], client: DatabasePool) async throws {
        try await TestDatabase.withOwnerConnection(of: client) { connection in
            try await connection.query("BEGIN", logger: logger)
            for change in changes {
                let id = "chg_\(change.position)_\(change.seq)"
                let body = #"{"app":"\#(app)","entitlements":{},"happened":[],"id":"\#(id)","occurredAt":"2026-05-01T10:00:00Z","position":\#(change.position),"recordedAt":"2026-05-01T10:00:01Z","seq":\#(change.seq),"type":"\#(change.type)","userId":"\#(change.user)"}"#
                try await connection.query("""
                    INSERT INTO ledger.changes (app, position, seq, user_id, type, occurred_at, recorded_at, body)
                    VALUES (\(app), \(change.position), \(Int32(change.seq)), \(change.user), \(change.type), now(), now(), \(body))
                    """, logger: logger)
            }
            let top = changes.map(\.position).max() ?? 0
            try await connection.query("""
                INSERT INTO ledger.change_writer (position, version) VALUES (\(top), 1)
                ON CONFLICT (id) DO UPDATE SET position = greatest(ledger.change_writer.position, excluded.position), updated_at = now()
                """, logger: logger)
            try await connection.query("COMMIT", logger: logger)
        }
    }

    /// The app registered, the use case and a running `WebhookDelivery` (quick polls, the given
    /// schedule and attempt deadline) for `body`.
    static func withWebhooks<T: Sendable>(
        _ name: String = #function, schedule: WebhookRetrySchedule, deadline: Duration = .seconds(5),
        _ body: @Sendable (ManageWebhooks, DatabasePool) async throws -> T
    ) async throws -> T {
        try await TestDatabase.withDatabase(name) { client, _ in
            let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "a test key")
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            try await registry.addApp(app, sharedSecret: nil)
            let store = PostgresWebhooks(client: client, secrets: secrets, logger: logger)
            let sending = HTTPWebhookSender.Configuration(deadline: deadline)
            let http = HTTPWebhookSender.makeHTTPClient(configuration: sending)
            let delivery = WebhookDelivery(
                store: store, sender: HTTPWebhookSender(client: http, configuration: sending),
                configuration: .init(schedule: schedule, pollInterval: .milliseconds(50), refreshInterval: .milliseconds(100)), logger: logger
            )
            let worker = Task { await delivery.run() }
            let result: Result<T, any Error>
            do { result = .success(try await body(ManageWebhooks(store: store, directory: registry), client)) } catch { result = .failure(error) }
            worker.cancel()
            await worker.value
            try await http.shutdown()
            return try result.get()
        }
    }

    /// Whether, per user, the changes arrived in log order (each one's attempts before the next's).
    static func inOrderPerUser(_ requests: [WebhookReceiver.Received]) -> Bool {
        var last: [String: WebhookChangeID] = [:]
        for request in requests {
            guard let id = request.webhookID.flatMap(WebhookChangeID.init),
                  let json = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any], let user = json["userId"] as? String
            else { return false }
            if let previous = last[user], (previous.position, previous.seq) > (id.position, id.seq) { return false }
            last[user] = id
        }
        return true
    }

    @Test("through 500s and timeouts every change arrives, signed, in order per user, each attempt listed with its answer")
    func everyChangeArrivesThroughFailures() async throws {
        // 500 six times, then three answers slower than the attempt's deadline, then 200.
        let receiver = WebhookReceiver { request in
            switch request.number {
            case 1...6: .init(status: 500, body: "boom \(request.number)")
            case 7...9: .init(status: 200, delay: .seconds(8))
            default: .init(status: 200, body: "thanks")
            }
        }
        try await receiver.run(paths: ["hook"]) { base in
            try await Self.withWebhooks(schedule: Self.schedule(30)) { webhooks, client in
                // Written before the endpoint: sent because it starts from position 0.
                try await Self.write([("ann", 1, 0, "purchase"), ("bob", 2, 0, "purchase"), ("ann", 3, 0, "renewal"), ("bob", 3, 1, "expiry")],
                                     client: client)
                let created = try await webhooks.add(app: Self.app, url: base + "/hook", fromPosition: 0)
                try await Self.write([("cat", 4, 0, "purchase"), ("ann", 5, 0, "refund"), ("cat", 6, 0, "renewal"), ("bob", 7, 0, "purchase"),
                                      ("ann", 8, 0, "purchase")], client: client)
                let expected: Set = ["chg_1_0", "chg_2_0", "chg_3_0", "chg_3_1", "chg_4_0", "chg_5_0", "chg_6_0", "chg_7_0", "chg_8_0"]
                #expect(try await eventually(timeout: .seconds(60)) {
                    try await webhooks.deliveries(app: Self.app, limit: 100).filter { $0.status == .delivered }.count == expected.count
                })

                let requests = receiver.requests(to: "hook")
                #expect(Set(requests.compactMap(\.webhookID)) == expected)
                #expect(Self.inOrderPerUser(requests), "\(requests.map { $0.webhookID ?? "?" })")
                for request in requests {
                    let id = try #require(request.webhookID), timestamp = try #require(request.headers["webhook-timestamp"])
                    let signature = try #require(request.headers["webhook-signature"])
                    #expect(WebhookVerification.verify(secret: created.secret.text, id: id, timestamp: timestamp, signatureHeader: signature, body: request.body))
                    #expect(!WebhookVerification.verify(secret: created.secret.text, id: id, timestamp: timestamp, signatureHeader: signature,
                                                        body: request.body + Data(" ".utf8)))
                    #expect(!WebhookVerification.verify(secret: WebhookSecret.generate().text, id: id, timestamp: timestamp, signatureHeader: signature,
                                                        body: request.body))
                    let json = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
                    #expect(json["id"] as? String == id)
                    #expect(request.headers["content-type"] == "application/json" && request.headers["user-agent"] == WebhookSigner.userAgent)
                    #expect(abs(Double(timestamp)! - Date().timeIntervalSince1970) < 600)
                }

                let deliveries = try await webhooks.deliveries(app: Self.app, endpointID: created.endpoint.id, limit: 100)
                #expect(deliveries.map(\.changeId) == ["chg_1_0", "chg_2_0", "chg_3_0", "chg_3_1", "chg_4_0", "chg_5_0", "chg_6_0", "chg_7_0", "chg_8_0"])
                let attempts = deliveries.flatMap(\.history)
                #expect(attempts.count == requests.count, "every request the endpoint got is an attempt listed")
                #expect(attempts.filter { $0.statusCode == 500 }.count == 6)
                #expect(attempts.contains { $0.statusCode == 500 && $0.response?.hasPrefix("boom") == true })
                // The three slow answers: each a try without a status, given up at the attempt's 5 s,
                // in the same words whichever timer fired first, the sender's own deadline or the
                // HTTP client's read timeout of the same length (which fired first once in CI).
                #expect(attempts.filter { $0.statusCode == nil && $0.error == "no complete answer within 5.0 seconds" }.count == 3, "\(attempts)")
                for delivery in deliveries {
                    #expect(delivery.history.map(\.attempt) == Array(1...delivery.attempts))
                    #expect(delivery.history.last?.statusCode == 200 && delivery.deliveredAt != nil)
                }
                #expect(try await webhooks.deliveries(app: Self.app, failedOnly: true).isEmpty)
            }
        }
    }

    @Test("retries end in parking, a parked change no longer holds back its user's next, and resending by change or position sends again")
    func parksAndResends() async throws {
        let failing = Mutex(true)
        let receiver = WebhookReceiver { _ in failing.withLock { $0 } ? .init(status: 503, body: "down") : .init(status: 204, body: "") }
        try await receiver.run(paths: ["hook"]) { base in
            try await Self.withWebhooks(schedule: Self.schedule(2)) { webhooks, client in
                let endpoint = try await webhooks.add(app: Self.app, url: base + "/hook").endpoint
                #expect(endpoint.position == 0)
                try await Self.write([("ann", 1, 0, "purchase"), ("ann", 2, 0, "renewal"), ("bob", 3, 0, "purchase")], client: client)
                #expect(try await eventually(timeout: .seconds(60)) {
                    try await webhooks.deliveries(app: Self.app, failedOnly: true).filter { $0.status == .parked }.count == 3
                })
                let parked = try await webhooks.deliveries(app: Self.app, failedOnly: true)
                for delivery in parked {
                    #expect(delivery.attempts == 3 && delivery.history.count == 3 && delivery.nextAttemptAt == nil, "\(delivery.history)")
                    // Each try refused by the endpoint, or (on a loaded machine, once in CI) not
                    // answered within the sender's time: a failure all the same, with its reason.
                    #expect(delivery.history.allSatisfy { ($0.statusCode == 503 && $0.response == "down") || ($0.statusCode == nil && $0.error != nil) },
                            "\(delivery.history)")
                    #expect(delivery.history.contains { $0.statusCode == 503 }, "\(delivery.history)")
                }
                // ann's second change went out only once her first was parked.
                let requests = receiver.requests(to: "hook")
                let firstOfSecond = try #require(requests.firstIndex { $0.webhookID == "chg_2_0" })
                #expect(requests.lastIndex { $0.webhookID == "chg_1_0" }! < firstOfSecond)

                failing.withLock { $0 = false }
                try await webhooks.resend(endpointID: endpoint.id, changeID: "chg_1_0")
                #expect(try await eventually { try await webhooks.deliveries(app: Self.app).first { $0.changeId == "chg_1_0" }?.status == .delivered })
                let resent = try #require(try await webhooks.deliveries(app: Self.app).first { $0.changeId == "chg_1_0" })
                #expect(resent.attempts == 4 && resent.history.map(\.attempt) == [1, 2, 3, 4] && resent.history.last?.statusCode == 204)
                #expect(try await webhooks.deliveries(app: Self.app).filter { $0.status == .parked }.map(\.changeId) == ["chg_2_0", "chg_3_0"])

                #expect(try await webhooks.resend(endpointID: endpoint.id, after: 1) == 2)
                #expect(try await eventually { try await webhooks.deliveries(app: Self.app).allSatisfy { $0.status == .delivered } })
                #expect(try await webhooks.deliveries(app: Self.app, failedOnly: true).isEmpty)

                // A delivered change is sent again too; one never queued is refused, saying why.
                let before = receiver.requests(to: "hook").count
                try await webhooks.resend(endpointID: endpoint.id, changeID: "chg_3_0")
                #expect(try await eventually { receiver.requests(to: "hook").count == before + 1 })
                let unknown = await #expect(throws: WebhookError.self) { try await webhooks.resend(endpointID: endpoint.id, changeID: "chg_9_0") }
                #expect(unknown?.code == .unknownChange)
                let malformed = await #expect(throws: WebhookError.self) { try await webhooks.resend(endpointID: endpoint.id, changeID: "9") }
                #expect(malformed?.message.contains("chg_<position>_<seq>") == true)
            }
        }
    }

    @Test("a redirect is a failed attempt and its Location is never asked for; URLs outside loopback need https; no key, no endpoint")
    func urlRules() async throws {
        let receiver = WebhookReceiver { request in
            request.path == "/redirect" ? .init(status: 302, location: "/elsewhere", body: "moved") : .init()
        }
        try await receiver.run(paths: ["redirect", "elsewhere"]) { base in
            try await Self.withWebhooks(schedule: Self.schedule(1)) { webhooks, client in
                // The Location points at this receiver itself: were it followed, /elsewhere would be asked for.
                _ = try await webhooks.add(app: Self.app, url: base + "/redirect")
                try await Self.write([("ann", 1, 0, "purchase")], client: client)
                #expect(try await eventually(timeout: .seconds(30)) {
                    try await webhooks.deliveries(app: Self.app).first?.status == .parked
                })
                let delivery = try #require(try await webhooks.deliveries(app: Self.app, failedOnly: true).first)
                #expect(delivery.history.map(\.statusCode) == [302, 302])
                #expect(delivery.history.allSatisfy { $0.error?.contains("redirect") == true && $0.response == "moved" })
                #expect(receiver.requests(to: "elsewhere").isEmpty)
                #expect(receiver.requests(to: "redirect").count == 2)

                let plain = await #expect(throws: WebhookError.self) { try await webhooks.add(app: Self.app, url: "http://example.com/hook") }
                #expect(plain?.message.contains("http:// is only allowed for loopback; use https://") == true)
                let unknownApp = await #expect(throws: AccessError.self) { try await webhooks.add(app: "com.example.unknown", url: "https://example.com/") }
                #expect(unknownApp?.code == .unknownApp)
                let badType = await #expect(throws: WebhookError.self) { try await webhooks.add(app: Self.app, url: "https://example.com/", types: ["Renewal!"]) }
                #expect(badType?.code == .invalidInput)

                let keyless = ManageWebhooks(store: PostgresWebhooks(client: client, secrets: nil, logger: Self.logger),
                                             directory: AppRegistry(client: client, logger: Self.logger))
                let noKey = await #expect(throws: SecretError.self) { try await keyless.add(app: Self.app, url: "https://example.com/hook") }
                #expect(noKey?.code == .noKey && noKey?.message.contains("LEDGER_SECRET_KEY") == true)
                #expect(try await webhooks.list(app: Self.app).count == 1)
            }
        }
    }

    @Test("with one endpoint dead, the other gets every change while the dead one is still being retried")
    func deadEndpointHoldsUpNoOther() async throws {
        let receiver = WebhookReceiver { request in
            request.path == "/dead" ? .init(status: 200, delay: .seconds(8)) : .init(status: 200)
        }
        try await receiver.run(paths: ["dead", "live"]) { base in
            try await Self.withWebhooks(schedule: Self.schedule(20), deadline: .seconds(3)) { webhooks, client in
                let dead = try await webhooks.add(app: Self.app, url: base + "/dead").endpoint
                let live = try await webhooks.add(app: Self.app, url: base + "/live", types: ["purchase", "renewal"]).endpoint
                let users = ["ann", "bob", "cat", "dan", "eve"]
                let changes = (1...20).map { (users[$0 % 5], Int64($0), 0, $0.isMultiple(of: 4) ? "expiry" : "purchase") }
                try await Self.write(changes, client: client)
                let sent = Set(changes.filter { $0.3 != "expiry" }.map { "chg_\($0.1)_0" })
                #expect(try await eventually(timeout: .seconds(60)) {
                    try await webhooks.deliveries(app: Self.app, endpointID: live.id, limit: 100).filter { $0.status == .delivered }.count == sent.count
                })
                #expect(Set(receiver.requests(to: "live").compactMap(\.webhookID)) == sent, "only the types it takes")
                #expect(Self.inOrderPerUser(receiver.requests(to: "live")))
                // The dead endpoint is still being tried: nothing of it delivered, nothing parked yet.
                let deadOnes = try await webhooks.deliveries(app: Self.app, endpointID: dead.id, limit: 100)
                #expect(deadOnes.count == 20 && deadOnes.allSatisfy { $0.status == .pending })

                // Removed, it is sent nothing more.
                try await webhooks.remove(id: dead.id)
                #expect(try await webhooks.list(app: Self.app).map(\.id) == [live.id])
                let removedAgain = await #expect(throws: WebhookError.self) { try await webhooks.resend(endpointID: dead.id, after: 0) }
                #expect(removedAgain?.code == .unknownEndpoint)
            }
        }
    }
}
