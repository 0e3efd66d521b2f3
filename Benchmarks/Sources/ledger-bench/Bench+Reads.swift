import ArgumentParser
import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerDomain
import LedgerRuntime
import LedgerStore
import LedgerTesting
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO

extension Bench {
    struct Reads: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Entitlement reads/s through `ledger serve` (wrk), against the same SQL statement through pgbench.",
            discussion: """
                Seeds a scratch database <database>_readbench (created afresh, dropped afterwards) with `bench seed`'s history, \
                starts `ledger serve` on it as a child process (its log in a file), and loads `GET …/users/{userId}/entitlements` \
                with wrk at --connections connections for --duration seconds, rotating over the seeded users: once with the \
                server logging every request at info, once at warning, and once at info with no entitlement rows kept in \
                memory (`serve --entitlement-cache-users 0`: every read queries PostgreSQL). Then pgbench runs the statement the route runs, with the \
                same users, at the same concurrency, prepared once per connection as the server prepares it. \
                Prints requests/s, p50 and p99 of each, the share of reads answered from memory (from /metrics), and the ratio. Needs wrk (apt-get install wrk) and pgbench \
                (apt-get install postgresql-client).
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Users to seed and read.") var users = 1_000
        @Option(help: "Events to seed in all (spread over the users; each user has one round at least).") var events = 20_000
        @Option(help: "Connections (wrk) and clients (pgbench).") var connections = 16
        @Option(help: "Seconds each load runs.") var duration = 10
        @Flag(help: "Keep the scratch database and the logs for inspection.") var keep = false

        func validate() throws {
            guard users >= 1, events >= users, connections >= 1, duration >= 1 else {
                throw ValidationError("--users, --connections and --duration must be at least 1, and --events at least --users")
            }
        }

        func run() async throws {
            var options = self.options
            if options.logLevel == nil, ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] == nil { options.logLevel = "warning" }
            let logger = try options.makeLogger()
            let wrk = try ExternalTool.locate("wrk", package: "wrk")
            let pgbench = try ExternalTool.locate("pgbench", package: "postgresql-client")
            let roles = try await options.databaseRoles(logger: logger)
            let scratch = try await roles.recreate(database: roles.runtime.database + "_readbench", logger: logger)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-readbench-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            Output.error("bench reads: scratch database \(scratch.runtime.database), files in \(folder.path)")

            let app = HistorySeeder.app(0)
            let token = try await LedgerDatabase.withClient(scratch.runtime, maximumConnections: 18, logger: logger) { client in
                let seeded = try await HistorySeeder(ledger: PostgresLedger(client: client, logger: logger), logger: logger)
                    .run(.init(apps: 1, users: users, events: events))
                let streams = try await client.query(
                    "SELECT count(DISTINCT stream_id) FROM ledger.events WHERE starts_with(stream_id, \(StreamID.userPrefix(app: app)))",
                    logger: logger
                ).collect().first?.decode(Int.self) ?? 0
                guard streams == users else {
                    throw CommandFailure(message: "\(seeded) events reached only \(streams) of \(users) users; every user should have had a round")
                }
                Output.error("bench reads: seeded \(seeded) events for \(users) users")
                let registry = AppRegistry(client: client, logger: logger)
                try await registry.addApp(app, sharedSecret: nil)
                return try await registry.createKey(app: app, scopes: [.read], name: "bench reads").token
            }
            let head = try await LedgerDatabase.withClient(scratch.runtime, maximumConnections: 1, logger: logger) { client in
                try await PostgresEventStore(client: client, logger: logger).headPosition()
            }

            var loads: [(String, Load)] = []
            var fromMemory: [Double] = []
            // /metrics answers on the API's listener only to the bearer of the metrics token.
            let metricsToken = "bench-" + UUID().uuidString
            let runs = [
                ("ledger serve, log at info (wrk)", "info", ["LEDGER_METRICS_TOKEN": metricsToken]),
                ("ledger serve, log at warning (wrk)", "warning", ["LEDGER_METRICS_TOKEN": metricsToken]),
                ("ledger serve, nothing kept (wrk)", "info", ["LEDGER_ENTITLEMENT_CACHE_USERS": "0", "LEDGER_METRICS_TOKEN": metricsToken]),
            ]
            for (index, (name, level, environment)) in runs.enumerated() {
                let server = try await ChildServer.start(database: scratch, logLevel: level, log: folder.appendingPathComponent("serve-\(index).log"),
                                                         environment: environment)
                do {
                    try await waitForProjections(server, app: app, token: token, head: head)
                    // The leading server also writes the change feed over the whole seeded log at
                    // its start: the reads are timed once it has, not against its catch-up.
                    try await waitForChangeWriter(scratch, head: head, logger: logger)
                    let script = folder.appendingPathComponent("entitlements.lua")
                    try Self.wrkScript(app: app, users: users, token: token).write(to: script, atomically: true, encoding: .utf8)
                    let output = try await ExternalTool.run(wrk, [
                        "-t", "2", "-c", "\(connections)", "-d", "\(duration)s", "-s", script.path, server.base,
                    ], timeout: .seconds(duration + 60))
                    let load = try Self.parseWrk(output)
                    loads.append((name, load))
                    fromMemory.append(try await Self.readsFromMemory(server, token: metricsToken) / load.requests)
                } catch {
                    server.stop()
                    throw error
                }
                server.stop()
            }

            let sql = try Self.pgbenchScript(app: app, users: users)
            let script = folder.appendingPathComponent("entitlements.sql")
            try sql.write(to: script, atomically: true, encoding: .utf8)
            let prefix = folder.appendingPathComponent("pgbench").path
            let output = try await ExternalTool.run(pgbench, [
                "-n", "-M", "prepared", "-c", "\(connections)", "-j", "2", "-T", "\(duration)", "-f", script.path,
                "--log", "--log-prefix", prefix, scratch.runtime.url(showingPassword: true),
            ], timeout: .seconds(duration + 60))
            let statement = try Self.parsePgbench(output, logs: folder)

            if keep {
                Output.error("bench reads: kept \(scratch.runtime.database) and \(folder.path)")
            } else {
                try await roles.drop(database: scratch.runtime.database, logger: logger)
                try? FileManager.default.removeItem(at: folder)
            }

            Output.line("entitlements read: \(users) users, \(events) events, \(connections) connections, \(duration) s each")
            Output.line("                                      requests/s    p50 ms    p99 ms   from memory")
            for (index, (name, load)) in (loads + [("one SQL statement (pgbench)", statement)]).enumerated() {
                let kept = index < fromMemory.count ? String(format: "%13.0f%%", fromMemory[index] * 100) : ""
                Output.line(name.padding(toLength: 36, withPad: " ", startingAt: 0) + String(format: "%12.0f %9.2f %9.2f", load.rate, load.p50, load.p99) + kept)
            }
            let info = loads[0].1, warning = loads[1].1, uncached = loads[2].1
            Output.line(String(format: "ratio (ledger, log at info / pgbench): %.2f (goal: at least 0.25)", info.rate / statement.rate))
            Output.line(String(format: "ratio with nothing kept in memory (every read a query): %.2f", uncached.rate / statement.rate))
            Output.line(String(format: "request logging at info: %+.1f%% of the throughput at warning", (info.rate / warning.rate - 1) * 100))
            let met = info.rate >= 5_000 && info.p99 < 10
            Output.line("goal of at least 5,000 requests/s with p99 under 10 ms: \(met ? "met" : "not met")")
        }

        /// Waits until the server answers every seeded event: its projections caught up with the seed.
        private func waitForProjections(_ server: ChildServer, app: String, token: String, head: Int64) async throws {
            var request = HTTPClientRequest(url: "\(server.base)/v1/apps/\(app)/users/user-0/entitlements?minPosition=\(head)")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let deadline = ContinuousClock.now + .seconds(300)
            var last = ""
            while ContinuousClock.now < deadline {
                if let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(10)) {
                    let body = (try? await response.body.collect(upTo: 1 << 20)).map { String(buffer: $0) } ?? ""
                    if response.status == .ok { return }
                    last = "\(response.status.code) \(body.prefix(300))"
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            throw CommandFailure(message: "the server's projections did not reach position \(head) within 300 s (last answer: \(last)); see \(server.log.path)")
        }

        /// Waits until the change writer has written the feed up to `head`.
        private func waitForChangeWriter(_ database: DatabaseRoles, head: Int64, logger: Logger) async throws {
            let deadline = ContinuousClock.now + .seconds(600)
            try await LedgerDatabase.withClient(database.runtime, maximumConnections: 1, logger: logger) { client in
                while ContinuousClock.now < deadline {
                    let rows = try await client.query("SELECT position FROM ledger.change_writer", logger: logger).collect()
                    if let position = try rows.first?.decode(Int64.self), position >= head { return }
                    try await Task.sleep(for: .milliseconds(200))
                }
                throw CommandFailure(message: "the change writer did not reach position \(head) within 600 s")
            }
        }

        /// How many entitlement reads the server answered from memory, from its /metrics.
        static func readsFromMemory(_ server: ChildServer, token: String) async throws -> Double {
            var request = HTTPClientRequest(url: "\(server.base)/metrics")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
            guard response.status == .ok else {
                throw CommandFailure(message: "the server's /metrics answered \(response.status.code): \(text.prefix(300))")
            }
            let prefix = #"ledger_entitlement_cache_reads_total{result="hit"} "#
            let line = text.split(separator: "\n").first { $0.hasPrefix(prefix) }
            return line.flatMap { Double($0.dropFirst(prefix.count)) } ?? 0
        }

        /// One load's figures.
        struct Load {
            let requests: Double
            let rate: Double
            let p50: Double
            let p99: Double
        }

        /// A wrk script: every request reads another user's entitlements; the totals come back on one line.
        static func wrkScript(app: String, users: Int, token: String) -> String {
            """
            local counter = 0
            request = function()
              counter = counter + 1
              local path = "/v1/apps/\(app)/users/user-" .. (counter % \(users)) .. "/entitlements"
              return wrk.format("GET", path, { ["Authorization"] = "Bearer \(token)" })
            end
            done = function(summary, latency, requests)
              local e = summary.errors
              io.write(string.format("LEDGER_WRK requests=%d duration_us=%d errors=%d non2xx=%d p50_us=%d p99_us=%d\\n",
                summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
                latency:percentile(50), latency:percentile(99)))
            end

            """
        }

        static func parseWrk(_ output: String) throws -> Load {
            guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("LEDGER_WRK ") }) else {
                throw CommandFailure(message: "wrk printed no totals: \(output.suffix(1_000))")
            }
            var values: [String: Double] = [:]
            for pair in line.split(separator: " ").dropFirst() {
                let parts = pair.split(separator: "=")
                if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
            }
            guard let requests = values["requests"], let duration = values["duration_us"], duration > 0,
                  let p50 = values["p50_us"], let p99 = values["p99_us"]
            else { throw CommandFailure(message: "wrk's totals are unreadable: \(line)") }
            let failed = (values["errors"] ?? 0) + (values["non2xx"] ?? 0)
            guard failed == 0 else {
                throw CommandFailure(message: "\(Int(failed)) of \(Int(requests)) reads failed or were not answered 200: the figure would not be a read's")
            }
            return Load(requests: requests, rate: requests / (duration / 1_000_000), p50: p50 / 1_000, p99: p99 / 1_000)
        }

        /// The route's statement for pgbench: the app inline, the user and their stream from a random number.
        static func pgbenchScript(app: String, users: Int) throws -> String {
            let prefix = try StreamID.user(app: app, user: "user-").rawValue
            guard try StreamID.user(app: app, user: "user-7").rawValue == prefix + "7" else {
                throw CommandFailure(message: "a user's stream id is not its prefix and the user id; the pgbench script cannot build it")
            }
            let statement = UserReadModels.entitlementsStatement
                .replacingOccurrences(of: "$1", with: "'\(app)'")
                .replacingOccurrences(of: "$2", with: "('user-' || CAST(:u AS text))")
                .replacingOccurrences(of: "$3", with: "('\(prefix)' || CAST(:u AS text))")
            // pgbench reads one statement per line unless continued.
            return "\\set u random(0, \(users - 1))\n" + statement.split(separator: "\n").joined(separator: " ") + ";\n"
        }

        /// tps from pgbench's report; p50 and p99 from its per-transaction logs (latency in microseconds, third column).
        static func parsePgbench(_ output: String, logs folder: URL) throws -> Load {
            guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
                  let rate = Double(line.dropFirst(6).prefix { $0.isNumber || $0 == "." })
            else { throw CommandFailure(message: "pgbench printed no tps: \(output.suffix(1_000))") }
            if let failed = output.split(separator: "\n").first(where: { $0.hasPrefix("number of failed transactions: ") }),
               !failed.hasPrefix("number of failed transactions: 0 ") {
                throw CommandFailure(message: "pgbench: \(failed)")
            }
            var latencies: [Double] = []
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasPrefix("pgbench.") {
                let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
                for entry in text.split(separator: "\n") {
                    let columns = entry.split(separator: " ")
                    if columns.count >= 3, let microseconds = Double(columns[2]) { latencies.append(microseconds / 1_000) }
                }
            }
            guard !latencies.isEmpty else { throw CommandFailure(message: "pgbench wrote no transaction log in \(folder.path)") }
            latencies.sort()
            func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            return Load(requests: Double(latencies.count), rate: rate, p50: percentile(0.5), p99: percentile(0.99))
        }
    }
}
