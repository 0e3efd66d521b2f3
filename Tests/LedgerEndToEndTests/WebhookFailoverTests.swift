import Foundation
import LedgerDomain
import LedgerStore
import LedgerTesting
import NIOHTTP1
import Testing

/// Two `ledger serve` processes on one database send the app's webhooks: only the one leading the
/// projections delivers, and when it is killed outright the other goes on from the endpoint's
/// stored position, so every change arrives (at least once, in order per user).
@Suite struct WebhookFailoverTests {
    @Test func onlyTheLeaderDeliversAndAfterItsKillTheOtherGoesOnFromTheStoredPosition() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServerCrashTests.program.path),
                     "build the program first (`swift build --build-tests` builds it)")
        let logger = APIHarness.logger
        let receiver = WebhookReceiver { _ in .init() }
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: logger) { served in
                try await receiver.run(paths: ["hook"]) { hooks in
                    let app = served.app
                    let logs = (0..<2).map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("ledger-hooks-\(UUID().uuidString).log") }
                    defer { logs.forEach { try? FileManager.default.removeItem(at: $0) } }
                    @Sendable func log(_ index: Int) -> String { (try? String(contentsOf: logs[index], encoding: .utf8)) ?? "" }
                    let servers = [try await served.startServer(database: settings, log: logs[0]),
                                   try await served.startServer(database: settings, log: logs[1])]
                    defer { servers.filter { $0.process.isRunning }.forEach { $0.kill() } }
                    let added = try await APIHarness.send(.POST, servers[0].base + "/v1/apps/\(app)/webhooks", key: served.key,
                                                          json: ["url": hooks + "/hook", "fromPosition": 0])
                    #expect(added.status == 201, "\(added.text)")
                    let secret = try #require(added.json["secret"] as? String)

                    let settled = try await eventually(timeout: .seconds(20)) {
                        [log(0), log(1)].filter { $0.contains(TwoServersTests.leads) }.count == 1
                    }
                    #expect(settled, "one leader:\n\(log(0).suffix(1_500))\n---\n\(log(1).suffix(1_500))")
                    let leaderIndex = log(0).contains(TwoServersTests.leads) ? 0 : 1
                    let (leader, standby) = (servers[leaderIndex], servers[1 - leaderIndex])

                    // Purchases posted to both servers; each becomes a change and a delivery.
                    for index in 0..<12 {
                        let receipt = try await served.buy("buyer-\(index % 4)", quantity: 1).receipt
                        let answer = try await APIHarness.send(.POST, servers[index % 2].base + "/v1/apps/\(app)/receipts", key: served.key,
                                                               json: ["userId": "buyer-\(index % 4)", "deviceId": "phone", "receiptData": receipt])
                        #expect(answer.status == 200, "\(answer.text)")
                    }
                    let beforeKill = try await eventually(timeout: .seconds(30)) { Set(receiver.requests.compactMap(\.webhookID)).count >= 12 }
                    #expect(beforeKill, "\(receiver.requests.count) deliveries before the kill")
                    // One server delivers: no change came twice while both ran.
                    let first = receiver.requests.compactMap(\.webhookID)
                    #expect(Set(first).count == first.count, "a change was delivered twice while both servers ran: \(first)")

                    leader.kill()
                    for index in 12..<24 {
                        let receipt = try await served.buy("buyer-\(index % 4)", quantity: 1).receipt
                        let answer = try await APIHarness.send(.POST, standby.base + "/v1/apps/\(app)/receipts", key: served.key,
                                                               json: ["userId": "buyer-\(index % 4)", "deviceId": "phone", "receiptData": receipt])
                        #expect(answer.status == 200, "\(answer.text)")
                    }
                    // Every change of the feed arrives, each verifying with the endpoint's secret.
                    @Sendable func feedIDs() async throws -> [String] {
                        let page = try await APIHarness.send(.GET, standby.base + "/v1/apps/\(app)/changes?after=0&limit=1000", key: served.key)
                        return (page.json["changes"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    }
                    let complete = try await eventually(timeout: .seconds(60)) {
                        let feed = try await feedIDs()
                        return feed.count >= 24 && Set(feed).isSubset(of: Set(receiver.requests.compactMap(\.webhookID)))
                    }
                    let feed = try await feedIDs()
                    #expect(complete, "\(feed.count) changes in the feed; \(Set(receiver.requests.compactMap(\.webhookID)).count) delivered\n\(log(1 - leaderIndex).suffix(2_000))")
                    #expect(WebhookDeliveryTests.inOrderPerUser(receiver.requests), "a user's changes out of order")
                    for request in receiver.requests {
                        let verified = WebhookVerification.verify(secret: secret, id: request.webhookID ?? "", timestamp: request.headers["webhook-timestamp"] ?? "",
                                                                  signatureHeader: request.headers["webhook-signature"] ?? "", body: request.body)
                        #expect(verified, "\(request.webhookID ?? "?") does not verify")
                    }
                    print("webhook failover: \(feed.count) changes, \(receiver.requests.count) requests, \(Set(receiver.requests.compactMap(\.webhookID)).count) distinct")
                }
            }
        }
    }
}
