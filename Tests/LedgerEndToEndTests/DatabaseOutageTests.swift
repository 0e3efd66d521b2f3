import AppStoreSimulator
import Foundation
import LedgerDomain
import LedgerStore
import LedgerTesting
import LocalPostgres
import Logging
import NIOHTTP1
import PostgresNIO
import Testing

/// PostgreSQL crashed and restarted again and again under `ledger serve` while clients ingest
/// receipts and consume with Idempotency-Keys, retrying what was not acknowledged: every
/// acknowledged write is in the log exactly once, clients only ever saw 503 for the outages, and
/// the same server process is fully back afterwards.
@Suite struct DatabaseOutageTests {
    /// A cluster of the test's own (the shared test server cannot be stopped), flushing to disk, so
    /// that an immediate stop loses nothing a commit acknowledged.
    struct PrivateServer {
        let local: LocalPostgres
        let home: URL

        static func start(logger: Logger) async throws -> (PrivateServer, DatabaseRoles) {
            let home = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-outage-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            var environment = ProcessInfo.processInfo.environment
            environment["LEDGER_HOME"] = home.path
            // A port of its own, kept across restarts: the managed server moves to a free one when its
            // port is taken while it is stopped, and other test servers start on this machine meanwhile.
            // Below the kernel's ephemeral ports (32768 and up here), which the tests' own HTTP
            // servers and clients take from.
            environment["LEDGER_POSTGRES_PORT"] = String(Int.random(in: 20_000...32_000))
            let local = LocalPostgres(environment: environment, durability: .durable)
            let runtime = try await local.start(logger: logger)
            return (PrivateServer(local: local, home: home), DatabaseRoles(runtime: runtime, owner: try local.ownerSettings()))
        }

        /// What the failure message of an outage test shows: the last lines of PostgreSQL's log and of
        /// the ledger's (both are removed with the test's folders).
        func logs(ledger: URL) -> String {
            let served = ((try? String(contentsOf: ledger, encoding: .utf8)) ?? "").split(separator: "\n").suffix(40)
            return "\n--- PostgreSQL's log, last lines:\n\(local.logTail(lines: 30))\n--- ledger serve's log, last lines:\n"
                + served.joined(separator: "\n")
        }

        /// How long `ledger serve` took to answer each request of `method` with `status`, in
        /// seconds, as its own log says (`http.duration_ms`): the server's share alone. The client's
        /// wall clock also holds the machine's share, seconds on a loaded machine; what the server
        /// must not do, wait for the pool, shows in its own figure.
        static func answerTimes(in log: URL, method: String, status: Int) -> [Double] {
            let lines = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n")
            return lines.compactMap { line -> Double? in
                let fields = Dictionary(line.split(separator: " ").compactMap { field -> (Substring, Substring)? in
                    guard let equals = field.firstIndex(of: "=") else { return nil }
                    return (field[..<equals], field[field.index(after: equals)...])
                }, uniquingKeysWith: { first, _ in first })
                guard fields["http.method"] == Substring(method), fields["http.status"] == Substring(String(status)),
                      let milliseconds = fields["http.duration_ms"].flatMap({ Double($0) }) else { return nil }
                return milliseconds / 1000
            }
        }

        func remove() {
            try? local.stop(mode: .immediate)
            try? FileManager.default.removeItem(at: home)
        }

        /// Runs `body` with a private server, the ledger's schema on it, and the test app served
        /// (`ServedApp`) and registered in it; the server is removed afterwards.
        static func withServedApp(_ body: @Sendable (PrivateServer, DatabaseRoles, ServedApp) async throws -> Void) async throws {
            try #require(FileManager.default.isExecutableFile(atPath: ServerCrashTests.program.path),
                         "build the program first (`swift build --build-tests` builds it)")
            let logger = APIHarness.logger
            let (server, roles) = try await PrivateServer.start(logger: logger)
            defer { server.remove() }
            try await roles.prepareSchema(logger: logger)
            try await LedgerDatabase.withClient(roles.runtime, maximumConnections: 2, logger: logger) { client in
                try await ServedApp.with(client, logger: logger) { served in
                    try await body(server, roles, served)
                }
            }
        }
    }

    /// Statuses the clients saw, and what was acknowledged.
    actor Ledger {
        var statuses: [Int: Int] = [:]
        var consumed: [String] = []
        var ingested: [String] = []
        var answers: [String: String] = [:]
        var slowRefusals: [Double] = []
        /// Requests the server left unanswered until the client gave up (30 s).
        var unanswered: [String] = []

        func saw(_ status: Int) { statuses[status, default: 0] += 1 }
        func acknowledgedConsumption(_ key: String) { consumed.append(key) }
        func acknowledgedReceipt(_ transactionId: String, answer: String) {
            ingested.append(transactionId)
            answers[transactionId] = answer
        }
        func refusalTook(_ seconds: Double) { slowRefusals.append(seconds) }
        func leftUnanswered(_ path: String) { unanswered.append(path) }
    }

    @Test func postgresCrashedTwentyTimesUnderLoadLosesNothingAndCountsNothingTwice() async throws {
        try await PrivateServer.withServedApp { server, roles, served in
            let logger = APIHarness.logger
            let app = served.app
            let key = served.key
            var pool: [(user: String, transactionId: String, receipt: String)] = []
            for index in 0..<80 {
                let bought = try await served.buy("buyer-\(index)", quantity: 10)
                pool.append(("buyer-\(index)", bought.transactionId, bought.receipt))
            }
            let consumers = ["eater-0", "eater-1", "eater-2"]
            var coins: [(user: String, receipt: String)] = []
            for user in consumers { for _ in 0..<10 { coins.append((user, try await served.buy(user, quantity: 10).receipt)) } }

            let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-outage-\(UUID().uuidString).log")
            defer { try? FileManager.default.removeItem(at: logFile) }
            let ledger = try await served.startServer(database: roles.runtime, log: logFile)
            defer { if ledger.process.isRunning { ledger.kill() } }
            let base = ledger.base
            for coin in coins {
                let answer = try await APIHarness.send(.POST, base + "/v1/apps/\(app)/receipts", key: key,
                                                       json: ["userId": coin.user, "deviceId": "phone", "receiptData": coin.receipt])
                #expect(answer.status == 200, "\(answer.text)")
            }

            let seen = Ledger()
            let stop = Flag()
            /// Sends until acknowledged: a 503 (or the server not answering) is retried with the same body and key.
            @Sendable func untilAcknowledged(_ path: String, body: Data, headers: [(String, String)] = []) async throws -> APIHarness.Answer {
                let deadline = ContinuousClock.now + .seconds(90)
                while true {
                    guard ContinuousClock.now < deadline else { throw HarnessError(message: "\(path) was not acknowledged within 90 s") }
                    let sent = ContinuousClock.now
                    if let answer = try? await APIHarness.send(.POST, base + path, key: key, raw: body, headers: headers) {
                        await seen.saw(answer.status)
                        if answer.status != 503 { return answer }
                    } else if sent.duration(to: .now) > .seconds(20) {
                        await seen.leftUnanswered(path)
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for user in consumers {
                    group.addTask {
                        var count = 0
                        while await !stop.isSet && count < 90 {
                            let idempotencyKey = "\(user)-\(count)-\(UUID().uuidString.prefix(8))"
                            let body = try JSONSerialization.data(withJSONObject: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
                            let answer = try await untilAcknowledged("/v1/apps/\(app)/users/\(user)/consumptions", body: body,
                                                                     headers: [("Idempotency-Key", idempotencyKey)])
                            #expect(answer.status == 201, "\(answer.text)")
                            if answer.status == 201 { await seen.acknowledgedConsumption(idempotencyKey) }
                            count += 1
                        }
                    }
                }
                for worker in 0..<2 {
                    let mine = pool.enumerated().filter { $0.offset % 2 == worker }.map(\.element)
                    group.addTask {
                        for item in mine {
                            let body = try JSONSerialization.data(withJSONObject: ["userId": item.user, "deviceId": "phone", "receiptData": item.receipt])
                            let answer = try await untilAcknowledged("/v1/apps/\(app)/receipts", body: body)
                            #expect(answer.status == 200, "\(answer.text)")
                            if answer.status == 200 { await seen.acknowledgedReceipt(item.transactionId, answer: answer.text) }
                        }
                    }
                }
                group.addTask {
                    defer { Task { await stop.set() } }
                    for _ in 0..<20 {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 150...400)))
                        try server.local.stop(mode: .immediate)
                        try await Task.sleep(for: .milliseconds(Int.random(in: 300...700)))
                        // While it is down, the server answers at once, and says so.
                        let started = ContinuousClock.now
                        let (health, healthFailure) = await probe(base + "/health", key: nil)
                        let (read, readFailure) = await probe(base + "/v1/apps/\(app)/users/eater-0/balances", key: key)
                        let took = started.duration(to: .now)
                        await seen.refusalTook(Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)
                        #expect(health?.status == 503 && read?.status == 503,
                                "\(health?.text ?? healthFailure) \(read?.text ?? readFailure)\(server.logs(ledger: logFile))")
                        #expect(read?.errorCode == "database_unavailable" && (read?.json["error"] as? [String: Any])?["retryable"] as? Bool == true)
                        do { _ = try await server.local.start(logger: logger) } catch {
                            Issue.record("PostgreSQL did not start again: \(error)\(server.logs(ledger: logFile))")
                            throw error
                        }
                    }
                    await stop.set()
                }
                try await group.waitForAll()
            }

            // The same process is back: healthy, and every acknowledged write is recorded once.
            let back = try await eventually(timeout: .seconds(30)) {
                (try? await APIHarness.send(.GET, base + "/health", key: nil))?.status == 200
            }
            let health = (try? await APIHarness.send(.GET, base + "/health", key: nil))?.text ?? "no answer"
            #expect(back, "fully back after the outages: /health says \(health)\(server.logs(ledger: logFile))")
            #expect(ledger.process.isRunning, "recovered without a restart")
            let statuses = await seen.statuses
            #expect(Set(statuses.keys).isSubset(of: [200, 201, 503]), "clients saw only successes and 503s: \(statuses)")
            let refusals = await seen.slowRefusals
            // Waiting for the pool would take the probe's whole 5 s; the server's own figure is the
            // one held to "at once", the client's also carries the loaded machine's share.
            #expect(refusals.allSatisfy { $0 < 5 }, "503s while down came without waiting for the pool (two requests each): \(refusals)")
            let served = PrivateServer.answerTimes(in: logFile, method: "GET", status: 503)
            #expect(!served.isEmpty && served.allSatisfy { $0 < 2 },
                    "the server answered its 503s while down at once, by its own log: \(served)")
            let consumed = await seen.consumed
            let ingested = await seen.ingested
            #expect(ingested.count == pool.count)
            try await LedgerDatabase.withClient(roles.runtime, maximumConnections: 2, logger: logger) { client in
                let events = try await client.query(
                    "SELECT dedup_key FROM ledger.events WHERE event_type LIKE 'ItemConsumed%'", logger: logger
                ).collect().map { try $0.decode(String?.self) }
                #expect(events.count == consumed.count, "one consumption per acknowledged key, none for anything else")
                #expect(Set(events.compactMap { $0 }) == Set(consumed.map { "command/\(app)/\($0)" }))
                let claims = try await client.query(
                    "SELECT dedup_key FROM ledger.events WHERE dedup_key LIKE \("appstore/\(app)/%/transaction/%")", logger: logger
                ).collect().map { try $0.decode(String.self) }
                #expect(claims.count == Set(claims).count)
                let claimed = Set(claims.map { String($0.split(separator: "/").last ?? "") })
                let lost = Set(ingested).subtracting(claimed)
            let answers = await seen.answers
            #expect(lost.isEmpty, "acknowledged receipts whose transaction is not in the log: \(lost.map { "\($0): \(answers[$0] ?? "")" })")
                #expect(try await HashChainVerifier(client: client, logger: logger).verify().isIntact)
            }
            let unanswered = await seen.unanswered
            #expect(unanswered.isEmpty, "requests the server never answered: \(unanswered)")
            let shutdown = ledger.stop()
            // Well within the 15 s after which `serve` gives up on requests that still wait.
            #expect(shutdown < .seconds(10), "SIGTERM stops the server after the outages\(server.logs(ledger: logFile))")
            print("database outages: shutdown took \(shutdown); statuses \(statuses); 503 answers while down took at most \(refusals.max() ?? 0) s for two requests; \(consumed.count) consumptions and \(ingested.count) receipts acknowledged")
        }
    }
}

extension DatabaseOutageTests {
    /// PostgreSQL away for half a minute: long enough for the connection pool's own retries to
    /// back off to several seconds apart (and its circuit breaker to trip). Requests are refused
    /// with 503 at once while it is away, and the same process serves reads and writes again
    /// within 5 s of its return.
    @Test func afterAHalfMinuteOutageTheSameServerIsBackWithinFiveSeconds() async throws {
        try await PrivateServer.withServedApp { server, roles, served in
            let logger = APIHarness.logger
            let app = served.app
            let key = served.key
            let receipt = try await served.buy("alice", quantity: 10).receipt
            let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-outage-\(UUID().uuidString).log")
            defer { try? FileManager.default.removeItem(at: logFile) }
            let ledger = try await served.startServer(database: roles.runtime, log: logFile)
            defer { if ledger.process.isRunning { ledger.kill() } }
            let ingested = try await APIHarness.send(.POST, ledger.base + "/v1/apps/\(app)/receipts", key: key,
                                                     json: ["userId": "alice", "deviceId": "phone", "receiptData": receipt])
            #expect(ingested.status == 200, "\(ingested.text)")

            try server.local.stop(mode: .immediate)
            let outageEnds = ContinuousClock.now + .seconds(30)
            var slowest = Duration.zero
            var statuses: [Int] = []
            while ContinuousClock.now < outageEnds {
                let started = ContinuousClock.now
                let consumed = try? await APIHarness.send(
                    .POST, ledger.base + "/v1/apps/\(app)/users/alice/consumptions", key: key,
                    json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"], headers: [("Idempotency-Key", "during-\(UUID())")]
                )
                slowest = max(slowest, started.duration(to: .now))
                statuses.append(consumed?.status ?? 0)
                try await Task.sleep(for: .seconds(1))
            }
            #expect(statuses.allSatisfy { $0 == 503 }, "every write while PostgreSQL was away was refused: \(statuses)\(server.logs(ledger: logFile))")
            // The client's clock carries the loaded machine's share (2.2 s seen under the whole suite
            // while the server's log said 2 ms); the server's own figure is held to "at once".
            #expect(slowest < .seconds(5), "refused without waiting for the pool, slowest \(slowest)\(server.logs(ledger: logFile))")
            let served = PrivateServer.answerTimes(in: logFile, method: "POST", status: 503)
            #expect(!served.isEmpty && served.allSatisfy { $0 < 2 },
                    "refused at once by the server's own log: \(served)\(server.logs(ledger: logFile))")

            do { _ = try await server.local.start(logger: logger) } catch {
                Issue.record("PostgreSQL did not start again: \(error)\(server.logs(ledger: logFile))")
                throw error
            }
            let returned = ContinuousClock.now
            let consumption = try JSONSerialization.data(withJSONObject: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            let idempotencyKey = "after-\(UUID())"
            var back: Duration?
            while back == nil && returned.duration(to: .now) < .seconds(30) {
                let health = try? await APIHarness.send(.GET, ledger.base + "/health", key: nil)
                let write = try? await APIHarness.send(.POST, ledger.base + "/v1/apps/\(app)/users/alice/consumptions", key: key,
                                                       raw: consumption, headers: [("Idempotency-Key", idempotencyKey)])
                let read = try? await APIHarness.send(.GET, ledger.base + "/v1/apps/\(app)/users/alice/balances", key: key)
                if health?.status == 200 && write?.status == 201 && read?.status == 200 {
                    back = returned.duration(to: .now)
                } else {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let health = (try? await APIHarness.send(.GET, ledger.base + "/health", key: nil))?.text ?? "no answer"
            let recovery = try #require(back, "the server was not back within 30 s of PostgreSQL's return: /health says \(health)\(server.logs(ledger: logFile))")
            #expect(recovery < .seconds(5), "fully back within 5 s of the database's return, took \(recovery)\(server.logs(ledger: logFile))")
            // The projections, which lose their lead with the lock's session, lead again once it is
            // back: the leadership asks once a second, so the line may come after the first answers
            // (once in CI, the check right after them saw only the first lead).
            let ledAgain = try await eventually(timeout: .seconds(30)) {
                let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                return log.components(separatedBy: "this server leads the projections").count - 1 >= 2
            }
            #expect(ledAgain, "the projections were led again after the outage\(server.logs(ledger: logFile))")
            let shutdown = ledger.stop()
            #expect(shutdown < .seconds(10), "SIGTERM stops the server after the outage, took \(shutdown)\(server.logs(ledger: logFile))")
            print("database outage of 30 s: writes refused with 503 within \(slowest); back \(recovery) after PostgreSQL's return; shutdown \(shutdown)")
        }
    }
}

/// A GET's answer, or what the client saw instead of one (within 5 s: while PostgreSQL is down
/// the ledger answers within a second).
private func probe(_ url: String, key: String?) async -> (answer: APIHarness.Answer?, failure: String) {
    let started = ContinuousClock.now
    do {
        return (try await APIHarness.send(.GET, url, key: key, timeout: .seconds(5)), "")
    } catch {
        return (nil, "no answer after \(started.duration(to: .now)): \(String(reflecting: error))")
    }
}

/// Set once, read by many.
actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}
