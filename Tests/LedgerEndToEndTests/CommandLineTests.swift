import Foundation
import LedgerStore
import LedgerTesting
import NIOHTTP1
import Testing

/// The `ledger` program run as finance and support run it, against the ledger's database, its
/// standard output compared with what the HTTP API serves for the same data.
@Suite struct CommandLineTests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    /// Runs `ledger ARGUMENTS` against the database; its output and errors are collected in files,
    /// so a long export never blocks on a full pipe.
    /// With `output`, standard output goes there instead (and `Run.output` is empty).
    static func ledger(
        _ arguments: [String], database: DatabaseSettings, environment extra: [String: String?] = [:], output: FileHandle? = nil,
        program: URL = ServerCrashTests.program
    ) async throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (outputFile, errorFile) = (directory.appendingPathComponent("out"), directory.appendingPathComponent("err"))
        guard FileManager.default.createFile(atPath: outputFile.path, contents: nil),
              FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        else { throw HarnessError(message: "cannot create output files in \(directory.path)") }
        var environment = ProcessInfo.processInfo.environment
        environment["LEDGER_DATABASE_URL"] = database.url(showingPassword: true)
        for (name, value) in extra { environment[name] = value }
        let process = try ChildProcess(program, arguments, environment: environment,
                                       output: output.map { .descriptor($0.fileDescriptor) } ?? .file(outputFile.path), error: .file(errorFile.path))
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                throw HarnessError(message: "\(program.lastPathComponent) \(arguments.joined(separator: " ")) did not finish within 60 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Run(
            status: process.terminationStatus,
            output: try String(contentsOf: outputFile, encoding: .utf8),
            errors: try String(contentsOf: errorFile, encoding: .utf8)
        )
    }

    /// Runs `ledger-bench ARGUMENTS` (the benchmarks and the fuzzer) as `ledger` is run.
    static func ledgerBench(_ arguments: [String], database: DatabaseSettings, environment extra: [String: String?] = [:]) async throws -> Run {
        try await ledger(arguments, database: database, environment: extra, program: ServerCrashTests.benchProgram)
    }

    @Test func theExportedCSVIsTheAPIsCSVByteForByteAndFiltersAndMistakesAreHandled() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            var position = 0
            for (user, device, quantity) in [("alice", "phone, \"blue\"", 3), ("bob", "tablet", 1), ("carol", "phone", 2)] {
                let bought = try await api.buy(user, "coins.100", quantity: quantity)
                let answer = try await api.ingest(user, device: device, receipt: bought.receipt, price: "0.99", currency: "USD")
                #expect(answer.status == 200, "\(answer.text)")
                position = max(position, answer.json["position"] as? Int ?? 0)
            }
            let finance = api.keys["finance"]
            let served = try await api.send(.GET, "/v1/audit/events?environment=sandbox&minPosition=\(position)", key: finance, headers: [("Accept", "text/csv")])
            #expect(served.status == 200)
            let app = APIHarness.app

            // Pages of 2 rows, so the keyset paging of the command is crossed twice.
            let csv = try await Self.ledger(["audit", "export", "--app", app, "--environment", "sandbox", "--format", "csv", "--page-size", "2"], database: api.settings)
            #expect(csv.status == 0, "\(csv.errors)")
            #expect(csv.output == served.text, "the command and the API give the same bytes")
            #expect(csv.output.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 4, "a header and 3 rows: \(csv.output)")
            #expect(csv.errors.contains("exported 3 rows"), "progress goes to standard error: \(csv.errors)")

            let json = try await Self.ledger(["audit", "export", "--app", app, "--environment", "sandbox", "--format", "json", "--user", "bob"], database: api.settings)
            #expect(json.status == 0, "\(json.errors)")
            let lines = json.output.split(separator: "\n")
            #expect(lines.count == 1, "JSON Lines, bob's one row: \(json.output)")
            let row = lines.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(row?["userId"] as? String == "bob" && row?["amount"] as? String == "0.99", "\(json.output)")

            let badTime = try await Self.ledger(["audit", "export", "--app", app, "--from", "2026-13-01"], database: api.settings)
            #expect(badTime.status != 0 && badTime.output.isEmpty)
            #expect(badTime.errors.contains("--from") && badTime.errors.contains("2026-13-01"), "\(badTime.errors)")

            let typo = try await Self.ledger(["audit", "export", "--app", "com.example.gmae"], database: api.settings)
            #expect(typo.status != 0 && typo.output.isEmpty, "a typo in --app is not an empty report: \(typo.output)")
            #expect(typo.errors.contains("com.example.gmae") && typo.errors.contains(app), "names the app and the registered ones: \(typo.errors)")

            let summary = try await Self.ledger(["audit", "summary", "--app", app, "--environment", "sandbox", "--format", "json"], database: api.settings)
            #expect(summary.status == 0, "\(summary.errors)")
            let totals = (try? JSONSerialization.jsonObject(with: Data(summary.output.utf8)) as? [String: Any])?["rows"] as? [[String: Any]]
            #expect(totals?.first?["gross"] as? String == "5.94" && totals?.first?["units"] as? Int == 6, "\(summary.output)")

            // This app's money is all sandbox's: unasked, it is not revenue, and all keeps it apart.
            let unasked = try await Self.ledger(["audit", "summary", "--app", app, "--format", "json"], database: api.settings)
            let unaskedRows = (try? JSONSerialization.jsonObject(with: Data(unasked.output.utf8)) as? [String: Any])?["rows"] as? [[String: Any]]
            #expect(unasked.status == 0 && unaskedRows?.isEmpty == true, "\(unasked.output)")
            let unaskedExport = try await Self.ledger(["audit", "export", "--app", app, "--format", "json"], database: api.settings)
            #expect(unaskedExport.status == 0 && unaskedExport.output.isEmpty, "\(unaskedExport.output)")
            let all = try await Self.ledger(["audit", "summary", "--app", app, "--environment", "all", "--format", "json"], database: api.settings)
            let allRows = (try? JSONSerialization.jsonObject(with: Data(all.output.utf8)) as? [String: Any])?["rows"] as? [[String: Any]]
            #expect(allRows?.count == 1 && allRows?.first?["environment"] as? String == "sandbox", "\(all.output)")
        }
    }

    /// Support asks the command line why a user lacks something: it answers in the API's shape,
    /// from the stream, now or as it was at a past position; a wrong user is named, not answered empty.
    @Test func queryEntitlementsAnswersAsTheAPIDoesNowAndAtAPastPosition() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            try await api.defineProduct("level.pack", type: "non_consumable")
            let coins = try await api.buy("alice", "coins.100", quantity: 5)
            let first = try await api.ingest("alice", device: "phone", receipt: coins.receipt)
            #expect(first.status == 200, "\(first.text)")
            let beforeLevels = first.json["position"] as? Int ?? 0
            let level = try await api.buy("alice", "level.pack")
            #expect(try await api.ingest("alice", device: "phone", receipt: level.receipt).status == 200)
            let used = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/alice/consumptions", key: api.allKey,
                                          json: ["productId": "coins.100", "quantity": 2, "deviceId": "phone"])
            #expect(used.status == 201, "\(used.text)")
            let head = used.json["position"] as? Int ?? 0
            let at = "2030-01-01T00:00:00Z"
            let served = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/alice/entitlements?at=\(at)&minPosition=\(head)", key: api.allKey)
            #expect(served.status == 200, "\(served.text)")

            let now = try await Self.ledger(["query", "entitlements", "--app", APIHarness.app, "--user", "alice", "--at", at], database: api.settings)
            #expect(now.status == 0, "\(now.errors)")
            var answered = (try? JSONSerialization.jsonObject(with: Data(now.output.utf8))) as? [String: Any] ?? [:]
            var expected = served.json
            #expect(answered["position"] as? Int == head, "the position of alice's last event: \(now.output)")
            // The API's position is how far the projections got, which may pass alice's last event.
            answered["position"] = nil
            expected["position"] = nil
            #expect(NSDictionary(dictionary: answered).isEqual(to: expected), "CLI \(now.output)\nAPI \(served.text)")

            let past = try await Self.ledger(
                ["query", "entitlements", "--app", APIHarness.app, "--user", "alice", "--at-position", String(beforeLevels)], database: api.settings
            )
            #expect(past.status == 0, "\(past.errors)")
            let then = (try? JSONSerialization.jsonObject(with: Data(past.output.utf8))) as? [String: Any] ?? [:]
            #expect((then["owned"] as? [Any])?.isEmpty == true, "level.pack was bought later: \(past.output)")
            #expect(((then["consumables"] as? [[String: Any]])?.first?["balance"]) as? Int == 5, "nothing used yet: \(past.output)")

            let nobody = try await Self.ledger(["query", "entitlements", "--app", APIHarness.app, "--user", "alcie"], database: api.settings)
            #expect(nobody.status != 0 && nobody.output.isEmpty)
            #expect(nobody.errors.contains("'alcie' has no events") && nobody.errors.contains("check --user"), "\(nobody.errors)")
            let typo = try await Self.ledger(["query", "entitlements", "--app", "com.example.gmae", "--user", "alice"], database: api.settings)
            #expect(typo.status != 0 && typo.output.isEmpty)
            #expect(typo.errors.contains("no app 'com.example.gmae' is registered") && typo.errors.contains(APIHarness.app), "names the registered apps: \(typo.errors)")
            let noStream = try await Self.ledger(["log", "tail", "--stream", "user/\(APIHarness.app)/alcie"], database: api.settings)
            #expect(noStream.status == 0 && noStream.output.isEmpty)
            #expect(noStream.errors.contains("stream 'user/\(APIHarness.app)/alcie' has no events"), "an empty answer says so: \(noStream.errors)")
        }
    }

    @Test func exchangeRatesAreImportedWholeOrNotAtAllAndListedInTheirOwnFormat() async throws {
        try await TestDatabase.withDatabase { _, settings in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rates-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let good = directory.appendingPathComponent("good.csv"), bad = directory.appendingPathComponent("bad.csv")
            try "date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,0.9461\n".write(to: good, atomically: true, encoding: .utf8)
            try "date,currency,reporting_currency,rate\n2026-11-30,JPY,EUR,0.0061\n2026-11-31,GBP,EUR,1.15\n".write(to: bad, atomically: true, encoding: .utf8)
            let refused = try await Self.ledger(["audit", "rates", "import", good.path, bad.path], database: settings)
            #expect(refused.status != 0)
            #expect(refused.errors.contains("bad.csv: line 3, column 1 (date): '2026-11-31' is not a day such as 2026-11-30; nothing was imported"),
                    "\(refused.errors)")
            #expect(!refused.errors.contains("Usage:"), "a file's mistake is not a mistake in the command line")
            #expect(try await Self.ledger(["audit", "rates", "list"], database: settings).output == "date,currency,reporting_currency,rate\n")
            let imported = try await Self.ledger(["audit", "rates", "import", good.path], database: settings)
            #expect(imported.status == 0 && imported.output.hasPrefix("1 rates imported (USD→EUR, from 2026-11-30 to 2026-11-30)"), "\(imported.errors)")
            let listed = try await Self.ledger(["audit", "rates", "list", "--reporting-currency", "eur"], database: settings)
            #expect(listed.output == "date,currency,reporting_currency,rate\n2026-11-30,USD,EUR,0.9461\n")
        }
    }

    @Test func theSeederWritesNoSyntheticPurchasesBesideRealOnesUnlessTold() async throws {
        try await APIHarness.run { api in
            let owner = try await TestDatabase.ownerSettings(for: api.settings)
            let withOwner: [String: String?] = ["LEDGER_OWNER_DATABASE_URL": owner.url(showingPassword: true)]
            let before = try await api.eventCount()
            let refused = try await Self.ledgerBench(["seed", "--apps", "1", "--users", "2", "--events", "10", "--concurrency", "1"],
                                                    database: api.settings, environment: withOwner)
            #expect(refused.status != 0 && refused.errors.contains("holds apps of its own (\(APIHarness.app))"), "\(refused.errors)")
            #expect(try await api.eventCount() == before)
            let told = try await Self.ledgerBench(["seed", "--apps", "1", "--users", "2", "--events", "10", "--concurrency", "1", "--into-existing"],
                                                 database: api.settings, environment: withOwner)
            #expect(told.status == 0, "\(told.errors)")
            #expect(try await api.eventCount() > before)
        }
    }

    /// The benchmarks that work in scratch databases create them as the owner and run as the
    /// server's role, as an operator runs them against an external server with both URLs.
    @Test func theScratchBenchmarksRunWithTheTwoRolesAndSayWhatIsMissingWithout() async throws {
        try await TestDatabase.withDatabase { _, settings in
            let owner = try await TestDatabase.ownerSettings(for: settings)
            let withOwner: [String: String?] = ["LEDGER_OWNER_DATABASE_URL": owner.url(showingPassword: true)]
            let fuzz = try await Self.ledgerBench(["fuzz", "--cases", "40", "--seed", "13"], database: settings, environment: withOwner)
            #expect(fuzz.status == 0, "\(fuzz.errors)")
            #expect(fuzz.output.contains("total cases=40 "), "\(fuzz.output)")
            #expect(fuzz.output.contains("crash=0 5xx=0 unexplained=0 recorded-on-refusal=0 projection-failed=0"), "\(fuzz.output)")
            let append = try await Self.ledgerBench(["append", "--events", "40", "--concurrency", "2"], database: settings, environment: withOwner)
            #expect(append.status == 0, "\(append.errors)")
            #expect(append.output.contains("ratio"), "\(append.output)")

            // Reads through a `ledger serve` child against pgbench: needs wrk and pgbench (.ci/run installs wrk).
            let reads = try await Self.ledgerBench(
                ["reads", "--users", "20", "--events", "400", "--duration", "1", "--connections", "4"], database: settings, environment: withOwner
            )
            #expect(reads.status == 0, "\(reads.errors)")
            for line in ["ledger serve, log at info (wrk)", "ledger serve, log at warning (wrk)", "one SQL statement (pgbench)", "ratio (ledger, log at info / pgbench)"] {
                #expect(reads.output.contains(line), "\(reads.output)")
            }

            let history = try await Self.ledgerBench(
                ["history", "--events", "200", "--short", "10", "--long", "100"], database: settings, environment: withOwner
            )
            #expect(history.status == 0, "\(history.errors)")
            for line in ["10 events per user", "100 events per user", "ratio (long / short): writes "] {
                #expect(history.output.contains(line), "\(history.output)")
            }
            let catalog = try await Self.ledgerBench(["catalog", "--users", "40", "--buyers-every", "4"], database: settings, environment: withOwner)
            #expect(catalog.status == 0, "\(catalog.errors)")
            let gems = catalog.output.split(separator: "\n").first { $0.hasPrefix("first definition of gems.pack") }
            #expect(gems?.split(separator: " ").dropFirst(7).first == "10", "ten of the forty bought gems.pack first: \(catalog.output)")
            let backwards = try await Self.ledgerBench(["history", "--short", "100", "--long", "10"], database: settings, environment: withOwner)
            #expect(backwards.status != 0)
            #expect(backwards.errors.contains("--short (100) must be below --long (10)"), "\(backwards.errors)")

            // The server's role alone may not create databases: the command says what to give it.
            let alone = try await Self.ledgerBench(["fuzz", "--cases", "1"], database: settings, environment: ["LEDGER_OWNER_DATABASE_URL": nil])
            #expect(alone.status != 0)
            #expect(alone.errors.contains("may not create or drop databases"), "\(alone.errors)")
        }
    }

    /// `ledger log tail | head`, `ledger audit export > /full/disk`: a reader that went away ends
    /// the command quietly, as a closed pipe ends any Unix tool; a write that fails otherwise is
    /// said. Neither crashes with a backtrace.
    @Test func aClosedPipeEndsACommandQuietlyAndAFullDiskIsSaid() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 2)
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)

            let pipe = Pipe()
            // Nobody reads: the first write meets a pipe without a reader.
            try pipe.fileHandleForReading.close()
            let closed = try await Self.ledger(["log", "tail"], database: api.settings, output: pipe.fileHandleForWriting)
            #expect(closed.status == 141, "the status a closed pipe gives: \(closed.errors)")
            #expect(!closed.errors.contains("Fatal error") && !closed.errors.contains("crashed"), "\(closed.errors)")

            let full = try await Self.ledger(
                ["audit", "export", "--app", APIHarness.app, "--environment", "sandbox", "--format", "csv"], database: api.settings,
                output: try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/full"))
            )
            #expect(full.status == 1, "\(full.errors)")
            #expect(full.errors.contains("cannot write standard output: No space left on device"), "\(full.errors)")
            #expect(!full.errors.contains("Fatal error"), "\(full.errors)")
        }
    }

    /// An operator starts a second `ledger serve` on a port the first holds: it says so, names the
    /// address and what to do, and stops; the first goes on serving.
    @Test func aServeOnABusyPortSaysWhatToDoAndStops() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await ServedApp.with(client, logger: TestDatabase.logger) { served in
                let log = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-busy-port-\(UUID().uuidString).log")
                defer { try? FileManager.default.removeItem(at: log) }
                let first = try await served.startServer(database: settings, log: log)
                defer { first.stop() }
                let port = try #require(URL(string: first.base)?.port)
                let second = try await Self.ledger(["serve", "--port", "\(port)"], database: settings)
                #expect(second.status == 1, "\(second.errors)")
                #expect(second.errors.contains("cannot listen on 127.0.0.1:\(port): another program listens there"), "\(second.errors)")
                #expect(!second.errors.contains("errno") && !second.errors.contains("does not answer"), "\(second.errors)")
                #expect(try await APIHarness.send(.GET, first.base + "/health", key: nil).status == 200)
            }
        }
    }
}
