import Foundation
import LedgerDomain
import LedgerProjections
import LedgerStore
import LedgerTesting
import NIOHTTP1
import Testing

/// Two `ledger serve` processes on one database, as behind a load balancer: one at a time runs the
/// projections, the other stands by and serves; killed outright, the leader is replaced within
/// seconds, and the projections end equal to a rebuild from the log.
@Suite struct TwoServersTests {
    static let leads = "this server leads the projections"
    static let standsBy = "this one stands by"

    @Test func theStandbyLeadsWithinFiveSecondsOfTheLeadersKillAndNoBatchIsFoughtOver() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServerCrashTests.program.path),
                     "build the program first (`swift build --build-tests` builds it)")
        let logger = APIHarness.logger
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: logger) { served in
                let app = served.app
                var receipts: [(user: String, receipt: String)] = []
                for index in 0..<40 {
                    receipts.append(("user-\(index)", try await served.buy("user-\(index)", quantity: 2).receipt))
                }
                let logs = (0..<2).map { _ in FileManager.default.temporaryDirectory.appendingPathComponent("ledger-two-\(UUID().uuidString).log") }
                defer { logs.forEach { try? FileManager.default.removeItem(at: $0) } }
                @Sendable func log(_ index: Int) -> String { (try? String(contentsOf: logs[index], encoding: .utf8)) ?? "" }
                let servers = [try await served.startServer(database: settings, log: logs[0]),
                               try await served.startServer(database: settings, log: logs[1])]
                defer { servers.filter { $0.process.isRunning }.forEach { $0.stop() } }

                // One leads, the other stands by.
                let settled = try await eventually(timeout: .seconds(20)) {
                    [log(0), log(1)].filter { $0.contains(Self.leads) }.count == 1
                        && [log(0), log(1)].filter { $0.contains(Self.standsBy) }.count == 1
                }
                #expect(settled, "one leader and one standby:\n\(log(0).suffix(1_500))\n---\n\(log(1).suffix(1_500))")
                let leaderIndex = log(0).contains(Self.leads) ? 0 : 1
                let (leader, standby) = (servers[leaderIndex], servers[1 - leaderIndex])

                // Both serve: receipts posted to either are recorded, and the leader's projections
                // answer reads on both.
                for (index, item) in receipts.prefix(20).enumerated() {
                    let answer = try await APIHarness.send(.POST, servers[index % 2].base + "/v1/apps/\(app)/receipts", key: served.key,
                                                           json: ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt])
                    #expect(answer.status == 200, "\(answer.text)")
                }
                let read = try await APIHarness.send(.GET, standby.base + "/v1/apps/\(app)/users/user-1/balances?minPosition=1", key: served.key)
                #expect(read.status == 200, "\(read.text)")

                // The leader killed outright: the standby leads within 5 s.
                leader.kill()
                let killed = ContinuousClock.now
                let tookOver = try await eventually(timeout: .seconds(20)) { log(1 - leaderIndex).contains(Self.leads) }
                let took = killed.duration(to: .now)
                #expect(tookOver && took < .seconds(5), "the standby led \(took) after the leader's kill:\n\(log(1 - leaderIndex).suffix(2_000))")

                for item in receipts.suffix(20) {
                    let answer = try await APIHarness.send(.POST, standby.base + "/v1/apps/\(app)/receipts", key: served.key,
                                                           json: ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt])
                    #expect(answer.status == 200, "\(answer.text)")
                }

                // The projections reach the head and equal a rebuild; no two runners fought over a batch.
                let head = try await PostgresEventStore(client: client, logger: logger).headPosition()
                _ = try await UserReadModels(client: client, logger: logger)
                    .waitForProjections(Projections.all.map { $0.name }, toReach: head, timeout: .seconds(60))
                let rebuilder = ProjectionRebuilder(client: client, logger: logger)
                for projection in Projections.all {
                    let report = try await rebuilder.rebuild(projection, dryRun: true)
                    #expect(report.differences == [], "\(projection.name) differs from a rebuild")
                }
                for index in 0..<2 {
                    #expect(!log(index).contains("another runner moved the checkpoint"), "server \(index) fought over a checkpoint")
                }
                print("two servers: the standby led \(took) after the leader was killed; log head \(head)")
            }
        }
    }
}
