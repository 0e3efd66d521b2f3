import AppStore
import AppStoreSimulator
import Crypto
import Foundation
import LedgerDomain
import LedgerHTTP
import LedgerProjections
import LedgerStore
import LedgerTesting
import Logging
import NIOHTTP1
import PostgresNIO
import Testing

/// The whole program, killed with SIGKILL while receipts pour in, then started again: clients
/// retry what failed, and the log holds every purchase exactly once, the hash chains are intact
/// and every projection equals a rebuild from the log.
@Suite struct ServerCrashTests {
    /// The `ledger` program `swift build` made beside the tests.
    static var program: URL { built("ledger") }

    /// The benchmarks' and fault tests' program, `ledger-bench` (never shipped).
    static var benchProgram: URL { built("ledger-bench") }

    private static func built(_ name: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/\(name)")
    }

    /// `ledger serve` as a child process on a free port, its log in a file.
    struct Server {
        let process: ChildProcess
        let base: String

        static func start(
            database: DatabaseSettings, appStore: String, secretKey: String, log: URL, killAt faultPoint: String? = nil
        ) async throws -> Server {
            guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
                throw HarnessError(message: "cannot create the server's log file \(log.path)")
            }
            // A fault point is `ledger-bench serve --kill-at`: the shipped `ledger` has none.
            // LEDGER_TEST_SERVE_LOG_LEVEL=debug shows the pool's and the service group's own log.
            var environment = ProcessInfo.processInfo.environment
            environment["LEDGER_DATABASE_URL"] = database.url(showingPassword: true)
            environment["LEDGER_APPSTORE_PRODUCTION_URL"] = appStore
            environment["LEDGER_APPSTORE_SANDBOX_URL"] = appStore
            environment["LEDGER_SECRET_KEY"] = secretKey
            environment["LEDGER_SECRET_KEY_FILE"] = nil
            let process = try ChildProcess(
                faultPoint == nil ? ServerCrashTests.program : ServerCrashTests.benchProgram,
                ["serve", "--port", "0", "--log-level", ProcessInfo.processInfo.environment["LEDGER_TEST_SERVE_LOG_LEVEL"] ?? "info"]
                    + (faultPoint.map { ["--kill-at", $0] } ?? []),
                environment: environment, output: .file(log.path), error: .output
            )
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if let range = text.range(of: "ledger.url=http://127.0.0.1:") {
                    let port = text[range.upperBound...].prefix { $0.isNumber }
                    return Server(process: process, base: "http://127.0.0.1:\(port)")
                }
                guard process.isRunning else { throw HarnessError(message: "ledger serve exited: \(text.suffix(2_000))") }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            throw HarnessError(message: "ledger serve did not start within 60 s")
        }

        func kill() {
            process.kill9()
        }

        /// SIGTERM, and SIGKILL if it has not finished within `grace`; how long it took.
        @discardableResult
        func stop(grace: Duration = .seconds(20)) -> Duration {
            let started = ContinuousClock.now
            process.terminate()
            while process.isRunning && started.duration(to: .now) < grace { usleep(20_000) }
            if process.isRunning { kill() }
            return started.duration(to: .now)
        }
    }

    @Test func aServerKilledMidIngestLosesNothingAndCountsNothingTwice() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program.path),
                     "build the program first (`swift build --build-tests` builds it): \(Self.program.path)")
        let logger = APIHarness.logger
        LedgerMetrics.bootstrap()
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: logger) { served in
                let app = served.app
                let key = served.key
                var receipts: [(user: String, receipt: String)] = []
                for index in 0..<60 {
                    let user = "user-\(index)"
                    receipts.append((user, try await served.buy(user, quantity: 2).receipt))
                }

                let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-crash-\(UUID().uuidString).log")
                defer { try? FileManager.default.removeItem(at: logFile) }
                let first = try await served.startServer(database: settings, log: logFile)

                // Post everything, 8 at a time, and kill the server once a third has been answered.
                let answered = Counter()
                let firstPID = first.process.processIdentifier
                let firstBase = first.base
                let killAfter = receipts.count / 3
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, item) in receipts.enumerated() {
                        let item = item
                        if index >= 8 { try await group.next() }
                        group.addTask {
                            // Once the server is dead, the other clients give up until it is back.
                            guard await answered.value < killAfter else { return }
                            let body: [String: Any] = ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt]
                            if (try? await APIHarness.send(.POST, firstBase + "/v1/apps/\(app)/receipts", key: key, json: body))?.status == 200 {
                                if await answered.increment() == killAfter { Foundation.kill(firstPID, SIGKILL) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                first.kill()
                let answeredBeforeCrash = await answered.value
                #expect(answeredBeforeCrash < receipts.count, "the kill came mid-ingest")

                // Started again, every client retries; each purchase is recorded once.
                let second = try await served.startServer(database: settings, log: logFile)
                defer { second.stop() }
                var lastPosition = 0
                for item in receipts {
                    let answer = try await APIHarness.send(.POST, second.base + "/v1/apps/\(app)/receipts", key: key,
                                                           json: ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt])
                    #expect(answer.status == 200, "\(answer.text)")
                    lastPosition = max(lastPosition, answer.json["position"] as? Int ?? 0)
                }
                let purchases = try await client.query("SELECT count(*), count(DISTINCT dedup_key) FROM ledger.events WHERE event_type = 'AppStoreTransactionObserved.v1'")
                for try await (count, distinct) in purchases.decode((Int64, Int64).self) {
                    #expect(count == Int64(receipts.count) && distinct == count)
                }
                let balances = try await APIHarness.send(.GET, second.base + "/v1/apps/\(app)/users/user-0/balances?minPosition=\(lastPosition)", key: key)
                #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == 2, "\(balances.text)")

                let reads = UserReadModels(client: client, logger: logger)
                let head = try await PostgresEventStore(client: client, logger: logger).headPosition()
                _ = try await reads.waitForProjections(Projections.all.map { $0.name }, toReach: head, timeout: .seconds(60))
                #expect(try await HashChainVerifier(client: client, logger: logger).verify().isIntact)
                let rebuilder = ProjectionRebuilder(client: client, logger: logger)
                for projection in Projections.all {
                    let report = try await rebuilder.rebuild(projection, dryRun: true)
                    #expect(report.differences == [], "\(projection.name) after the crash differs from a rebuild")
                }
            }
        }
    }
}

extension ServerCrashTests {
    /// The server dies right after a consumption's append commits, before it answers; the client
    /// retries under the same Idempotency-Key against a new server: one consumption, answered.
    @Test func aServerKilledBetweenAppendAndAnswerConsumesOnceOnRetry() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program.path),
                     "build the program first (`swift build --build-tests` builds it): \(Self.program.path)")
        let logger = APIHarness.logger
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: logger) { served in
                let app = served.app
                let key = served.key
                let receipt = try await served.buy("alice", quantity: 5).receipt

                let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-failpoint-\(UUID().uuidString).log")
                defer { try? FileManager.default.removeItem(at: logFile) }
                let doomed = try await served.startServer(database: settings, log: logFile, killAt: "after-command-append")
                let ingested = try await APIHarness.send(.POST, doomed.base + "/v1/apps/\(app)/receipts", key: key,
                                                         json: ["userId": "alice", "deviceId": "phone", "receiptData": receipt])
                #expect(ingested.status == 200, "\(ingested.text)")

                let consumption = try JSONSerialization.data(withJSONObject: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
                let headers = [("Idempotency-Key", "consume-\(UUID().uuidString)")]
                let path = "/v1/apps/\(app)/users/alice/consumptions"
                let lost = try? await APIHarness.send(.POST, doomed.base + path, key: key, raw: consumption, headers: headers)
                #expect(lost == nil, "the server died before answering: \(lost?.text ?? "")")
                doomed.process.waitUntilExit()
                #expect(doomed.process.terminationReason == .uncaughtSignal && doomed.process.terminationStatus == SIGKILL)
                #expect(try await consumptions(client) == 1, "the append committed before the crash")

                let revived = try await served.startServer(database: settings, log: logFile)
                defer { revived.stop() }
                let retry = try await APIHarness.send(.POST, revived.base + path, key: key, raw: consumption, headers: headers)
                #expect(retry.status == 201, "\(retry.text)")
                #expect(retry.json["balance"] as? Int == 4)
                let again = try await APIHarness.send(.POST, revived.base + path, key: key, raw: consumption, headers: headers)
                #expect(again.status == 201 && again.body == retry.body)
                #expect(try await consumptions(client) == 1, "one consumption, however often it was retried")
            }
        }
    }

    private func consumptions(_ client: DatabasePool) async throws -> Int {
        try await client.query("SELECT count(*) FROM ledger.events WHERE event_type LIKE 'ItemConsumed%'").collect()[0].decode(Int.self)
    }
}

/// Counts answers across tasks.
actor Counter {
    private(set) var value = 0

    func increment() -> Int {
        value += 1
        return value
    }
}
