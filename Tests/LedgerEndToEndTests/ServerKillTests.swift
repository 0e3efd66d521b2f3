import Foundation
import LedgerProjections
import LedgerStore
import LedgerTesting
import Logging
import NIOHTTP1
import PostgresNIO
import Testing

/// `ledger serve` killed with SIGKILL twenty times while clients post receipts, consume with
/// Idempotency-Keys, finish transactions and restore to new devices, each retrying what was not
/// answered against whichever server runs next: every acknowledged write is in the log once,
/// nothing is applied twice, and every projection equals a rebuild from the log.
@Suite struct ServerKillTests {
    /// Where the running server is, and what the clients were answered.
    actor Ledger {
        var base: String
        var answered: [String: Int] = [:]
        var consumed: [String] = []
        var ingested: [String] = []

        init(base: String) { self.base = base }

        func moved(to base: String) { self.base = base }
        func saw(_ route: String) { answered[route, default: 0] += 1 }
        func acknowledgedConsumption(_ key: String) { consumed.append(key) }
        func acknowledgedReceipt(_ transactionId: String) { ingested.append(transactionId) }
    }

    @Test func aServerKilledTwentyTimesUnderMixedLoadLosesNothingAndAppliesNothingTwice() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServerCrashTests.program.path),
                     "build the program first (`swift build --build-tests` builds it): \(ServerCrashTests.program.path)")
        let logger = APIHarness.logger
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: logger) { served in
                let app = served.app
                let key = served.key
                // Buyers whose receipts are posted during the kills; eaters who hold coins before them.
                var receipts: [(user: String, transactionId: String, receipt: String)] = []
                for index in 0..<60 {
                    let bought = try await served.buy("buyer-\(index)", quantity: 3)
                    receipts.append(("buyer-\(index)", bought.transactionId, bought.receipt))
                }
                let eaters = ["eater-0", "eater-1"]
                var coins: [(user: String, transactionId: String, receipt: String)] = []
                // 60 coins each: as many as an eater ever consumes (at most 60 times, one each), so
                // that however fast the load runs between kills, no consumption meets an empty balance.
                for user in eaters { for _ in 0..<6 { let b = try await served.buy(user, quantity: 10); coins.append((user, b.transactionId, b.receipt)) } }

                let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-kill-\(UUID().uuidString).log")
                defer { try? FileManager.default.removeItem(at: logFile) }
                var server = try await served.startServer(database: settings, log: logFile)
                for coin in coins {
                    let answer = try await APIHarness.send(.POST, server.base + "/v1/apps/\(app)/receipts", key: key,
                                                           json: ["userId": coin.user, "deviceId": "phone", "receiptData": coin.receipt])
                    #expect(answer.status == 200, "\(answer.text)")
                }
                let ledger = Ledger(base: server.base)
                let purchases = coins
                let stop = Flag()

                /// Sends until answered: a refused connection, a dropped one or a 503 is retried,
                /// with the same body and key, against the server running then.
                @Sendable func untilAnswered(_ path: String, json: [String: Any], headers: [(String, String)] = []) async throws -> APIHarness.Answer {
                    let body = try JSONSerialization.data(withJSONObject: json)
                    let deadline = ContinuousClock.now + .seconds(120)
                    while ContinuousClock.now < deadline {
                        let base = await ledger.base
                        // A request the kill caught can wait for its answer until this timeout: short, so the client moves on.
                        if let answer = try? await APIHarness.send(.POST, base + path, key: key, raw: body, headers: headers, timeout: .seconds(3)),
                           answer.status != 503 {
                            await ledger.saw(path.split(separator: "/").last.map(String.init) ?? path)
                            return answer
                        }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    throw HarnessError(message: "\(path) was not answered within 120 s")
                }

                try await withThrowingTaskGroup(of: Void.self) { group in
                    // Receipts, two clients.
                    for worker in 0..<2 {
                        let mine = receipts.enumerated().filter { $0.offset % 2 == worker }.map(\.element)
                        group.addTask {
                            for item in mine {
                                let answer = try await untilAnswered("/v1/apps/\(app)/receipts",
                                                                     json: ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt])
                                #expect(answer.status == 200, "\(answer.text)")
                                if answer.status == 200 { await ledger.acknowledgedReceipt(item.transactionId) }
                            }
                        }
                    }
                    // Consumptions with keys, and restores to new devices with keys.
                    for user in eaters {
                        group.addTask {
                            var count = 0
                            while await !stop.isSet && count < 60 {
                                let idempotencyKey = "\(user)-\(count)-\(UUID().uuidString.prefix(8))"
                                let answer = try await untilAnswered("/v1/apps/\(app)/users/\(user)/consumptions",
                                                                     json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"],
                                                                     headers: [("Idempotency-Key", idempotencyKey)])
                                #expect(answer.status == 201, "\(answer.text)")
                                if answer.status == 201 { await ledger.acknowledgedConsumption(idempotencyKey) }
                                if count % 5 == 0 {
                                    let restored = try await untilAnswered("/v1/apps/\(app)/users/\(user)/devices/tablet-\(count)/restore",
                                                                           json: [:], headers: [("Idempotency-Key", "restore-\(idempotencyKey)")])
                                    #expect(restored.status == 200, "\(restored.text)")
                                }
                                count += 1
                            }
                        }
                    }
                    // Finishes of the eaters' purchases, again and again, with keys.
                    group.addTask {
                        var round = 0
                        while await !stop.isSet {
                            for coin in purchases {
                                let finished = try await untilAnswered("/v1/apps/\(app)/transactions/\(coin.transactionId)/finish",
                                                                       json: ["deviceId": "phone"], headers: [("Idempotency-Key", "finish-\(round)-\(coin.transactionId)")])
                                #expect(finished.status == 200, "\(finished.text)")
                            }
                            round += 1
                        }
                    }
                    // Twenty kills, each after a short while of load, and a new server each time.
                    for _ in 0..<20 {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 600...1_500)))
                        server.kill()
                        server = try await served.startServer(database: settings, log: logFile)
                        await ledger.moved(to: server.base)
                    }
                    await stop.set()
                    try await group.waitForAll()
                }
                defer { server.stop() }

                // Every acknowledged write once; the projections caught up equal a rebuild.
                let consumed = await ledger.consumed
                let ingested = await ledger.ingested
                #expect(ingested.count == receipts.count)
                let consumptions = try await client.query(
                    "SELECT dedup_key FROM ledger.events WHERE event_type LIKE 'ItemConsumed%'", logger: logger
                ).collect().map { try $0.decode(String?.self) }
                #expect(consumptions.count == consumed.count, "one consumption per acknowledged key, none for anything else")
                #expect(Set(consumptions.compactMap { $0 }) == Set(consumed.map { "command/\(app)/\($0)" }))
                let claims = try await client.query(
                    "SELECT dedup_key FROM ledger.events WHERE dedup_key LIKE \("appstore/\(app)/%/transaction/%")", logger: logger
                ).collect().map { try $0.decode(String.self) }
                #expect(claims.count == Set(claims).count, "no transaction recorded twice")
                let claimed = Set(claims.map { String($0.split(separator: "/").last ?? "") })
                #expect(Set(ingested).subtracting(claimed).isEmpty, "every acknowledged receipt's transaction is in the log")
                let commandKeys = try await client.query(
                    "SELECT dedup_key, count(*) FROM ledger.events WHERE dedup_key LIKE 'command/%' GROUP BY 1 HAVING count(*) > 1", logger: logger
                ).collect()
                #expect(commandKeys.isEmpty, "no command applied twice")
                #expect(try await HashChainVerifier(client: client, logger: logger).verify().isIntact)

                let head = try await PostgresEventStore(client: client, logger: logger).headPosition()
                let reads = UserReadModels(client: client, logger: logger)
                _ = try await reads.waitForProjections(Projections.all.map { $0.name }, toReach: head, timeout: .seconds(60))
                let rebuilder = ProjectionRebuilder(client: client, logger: logger)
                for projection in Projections.all {
                    let report = try await rebuilder.rebuild(projection, dryRun: true)
                    #expect(report.differences == [], "\(projection.name) after twenty kills differs from a rebuild")
                }
                let answered = await ledger.answered
                print("twenty kills of ledger serve: answered \(answered); \(consumed.count) consumptions and \(ingested.count) receipts acknowledged; log head \(head)")
            }
        }
    }
}
