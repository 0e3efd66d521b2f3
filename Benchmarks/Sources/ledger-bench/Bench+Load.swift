import AppStore
import AppStoreSimulator
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
import LocalPostgres
import Logging
import ServiceLifecycle
import UnixSignals

extension Bench {
    struct Load: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "http",
            abstract: "Load the HTTP API on loopback: receipts ingested/s, entitlement reads/s and App Store notifications/s, against `bench append`.",
            discussion: """
                Runs the ledger's server and the App Store simulator in this process (with --apart, as child processes: `ledger serve` and `ledger appstore-sim`), on free loopback ports, over a scratch database <database>_httpbench (created afresh, dropped afterwards). Before timing, each of --receipts test users buys a consumable in the simulator, so that every timed POST of a receipt is verified by the simulator and records something new (the post and the transaction observed: one append of two events, after the receipt and the App Store's answer are kept). Before that, --history events of other users (a ledger in service: the log's size decides how PostgreSQL plans the hottest lookups), and nothing is timed before the projections and the change feed have caught up with them. Then --reads entitlement reads of those users. Then, for each timed user, a REFUND notification (App Store Server Notifications V2, signed by a test authority this ledger trusts, as the simulator signs its own) posted from --workers concurrent senders: each is verified (chain, ES256, bundle, environment) and records the notification and the refunded transaction's new fields. --workers requests in flight, each worker on its own keep-alive connection. Finally `ledger-bench append` at the same concurrency, batch 1, in a scratch database <database>_bench, and the ratio of receipts/s to appends/s. Last, the CPU time each process used per request in each phase (per event for the appends), read from /proc: this process, the child processes with --apart, and PostgreSQL (every process named postgres on this machine), and how many cores were busy.
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Receipts to ingest (one test user each).") var receipts = 4_000
        @Option(help: "Entitlement reads.") var reads = 20_000
        @Option(help: "Requests in flight.") var workers = 16
        @Option(help: "Events for the append baseline.") var appendEvents = 20_000
        @Option(help: "Events of other users (`ledger-bench seed`'s) written before anything is timed: a ledger in service, not a new one (0 for an empty log).")
        var history = 20_000
        @Option(help: "Where the test users buy: sandbox (each receipt refused by production first, 21007, then verified by the sandbox, as Apple does) or production (one verification).")
        var environment: BenchEnvironment = .sandbox
        @Flag(help: "Run the ledger's server (`ledger serve`) and the App Store simulator (`ledger appstore-sim`) as processes of their own, the load in this one, so that the CPU each uses per request is told apart (in-process, one figure covers all three).")
        var apart = false
        @Flag(help: "Keep the scratch databases (and with --apart the servers' logs) for inspection.") var keep = false

        func run() async throws {
            var options = self.options
            if options.logLevel == nil, ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] == nil { options.logLevel = "warning" }
            let logger = try options.makeLogger()
            guard receipts >= 1, reads >= 1, workers >= 1 else { throw CommandFailure(message: "--receipts, --reads and --workers must be at least 1") }
            let roles = try await options.databaseRoles(logger: logger)
            let scratch = try await roles.recreate(database: roles.runtime.database + "_httpbench", logger: logger)
            Output.error("bench http: scratch database \(scratch.runtime.database); \(receipts) \(environment.rawValue) receipts, \(reads) reads, \(workers) workers")
            if history > 0 {
                Output.error("bench http: writing a history of \(history) events for 1,000 other users (not timed)")
                try await scratch.prepareSchema(logger: logger)
                let history = self.history
                _ = try await LedgerDatabase.withClient(scratch.runtime, maximumConnections: 20, logger: logger) { client in
                    try await HistorySeeder(ledger: PostgresLedger(client: client, logger: logger), logger: logger).run(
                        .init(apps: 3, users: 1_000, events: history, concurrency: 16, seed: 42)
                    ) { _ in }
                }
            }

            var configuration = HTTPClient.Configuration()
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = workers + 4
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let measured: (ingest: HTTPLoad.Measurement, read: HTTPLoad.Measurement, notifications: HTTPLoad.Measurement)
            do {
                measured = apart
                    ? try await runApart(scratch: scratch, http: http, logger: logger)
                    : try await runInProcess(scratch: scratch, secrets: try options.secretSealer(), http: http, logger: logger)
            } catch {
                try? await http.shutdown()
                throw error
            }
            try await http.shutdown()
            let (ingest, read, notified) = (measured.ingest, measured.read, measured.notifications)

            // The append baseline writes a table of its own: it runs as the owner when one is known.
            let appendScratch = try await roles.recreate(database: roles.runtime.database + "_bench", logger: logger)
            let workers = self.workers, appendEvents = self.appendEvents
            let append = try await LedgerDatabase.withClient(appendScratch.owner ?? appendScratch.runtime, maximumConnections: workers + 2, logger: logger) { client in
                try await AppendBenchmark(client: client, logger: logger).run(
                    .init(concurrency: workers, streams: 1_000, events: appendEvents, batch: 1),
                    cpu: CPUMeter.isAvailable ? CPUMeter(processes: [("bench", getpid())]) : nil
                )
            }
            if !keep {
                try await roles.drop(database: appendScratch.runtime.database, logger: logger)
                try await roles.drop(database: scratch.runtime.database, logger: logger)
            }

            func row(_ name: String, _ rate: Double, _ p50: Double, _ p99: Double, _ seconds: Double, _ failures: Int) -> String {
                name.padding(toLength: 28, withPad: " ", startingAt: 0) + String(format: "%10.0f %9.2f %9.2f %9.2f %8d", rate, p50, p99, seconds, failures)
            }
            Output.line("http workers=\(workers) receipts=\(ingest.requests) (\(environment.rawValue)) reads=\(read.requests); append events=\(appendEvents) batch=1")
            Output.line("                                per s    p50 ms    p99 ms   total s   errors")
            Output.line(row("POST receipts (ingest)", ingest.perSecond, ingest.p50, ingest.p99, ingest.seconds, ingest.failures))
            Output.line(row("GET entitlements", read.perSecond, read.p50, read.p99, read.seconds, read.failures))
            Output.line(row("POST notifications (REFUND)", notified.perSecond, notified.p50, notified.p99, notified.seconds, notified.failures))
            Output.line(row("ledger.append (batch 1)", append.ledger.eventsPerSecond, append.ledger.p50, append.ledger.p99, append.ledger.seconds, 0))
            Output.line(row("raw INSERT (batch 1)", append.baseline.eventsPerSecond, append.baseline.p50, append.baseline.p99, append.baseline.seconds, 0))
            Output.line(String(format: "ratio (receipts ingested/s / ledger.append/s): %.2f", ingest.perSecond / append.ledger.eventsPerSecond))
            Output.line(String(format: "ratio (notifications recorded/s / ledger.append/s): %.2f", notified.perSecond / append.ledger.eventsPerSecond))
            printCPU([
                ("POST receipts (ingest)", ingest.cpu, ingest.requests, ingest.seconds),
                ("GET entitlements", read.cpu, read.requests, read.seconds),
                ("POST notifications (REFUND)", notified.cpu, notified.requests, notified.seconds),
                ("ledger.append (batch 1)", append.ledger.cpu, append.ledger.events, append.ledger.seconds),
                ("raw INSERT (batch 1)", append.baseline.cpu, append.baseline.events, append.baseline.seconds),
            ])
        }

        /// The ledger and the simulator in this process, as services of one group.
        private func runInProcess(
            scratch: DatabaseRoles, secrets configured: SecretSealer?, http: HTTPClient, logger: Logger
        ) async throws -> (ingest: HTTPLoad.Measurement, read: HTTPLoad.Measurement, notifications: HTTPLoad.Measurement) {
            let simulatorForLedger = ServerPort()
            let simulatorForLoad = ServerPort()
            let ledgerPort = ServerPort()
            let simulator = try AppStoreSimulator(configuration: .init(host: "127.0.0.1", port: 0, environment: environment.store), logger: logger) { port in
                simulatorForLedger.report(port)
                simulatorForLoad.report(port)
            }
            // The scratch database is thrown away: its app's secret may be sealed with a key of this run.
            let secrets = try configured ?? SecretSealer(key: SecretSealer.generateKey(), origin: "a key of this run only")
            let ledger = DemoLedgerService(
                roles: scratch, secrets: secrets, simulatorPort: simulatorForLedger, ledgerPort: ledgerPort,
                signedPayloads: SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, simulator.signedPayloads.authority.root]),
                logger: logger
            )
            let load = HTTPLoadService(
                settings: scratch.runtime, secrets: secrets, load: HTTPLoad(http: http), simulatorPort: simulatorForLoad, ledgerPort: ledgerPort,
                receipts: receipts, reads: reads, workers: workers,
                cpu: CPUMeter.isAvailable ? CPUMeter(processes: [("bench (load, ledger, simulator)", getpid())]) : nil,
                signer: simulator.signedPayloads, logger: logger
            )
            let group = ServiceGroup(configuration: .init(
                services: [
                    .init(service: simulator), .init(service: ledger),
                    .init(service: load, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
            ))
            try await group.run()
            guard let measured = await load.results.value else { throw CommandFailure(message: "the load stopped before it measured") }
            return measured
        }

        /// `ledger serve` and `ledger appstore-sim` as child processes, the load in this one: the
        /// CPU of each is told apart.
        private func runApart(
            scratch: DatabaseRoles, http: HTTPClient, logger: Logger
        ) async throws -> (ingest: HTTPLoad.Measurement, read: HTTPLoad.Measurement, notifications: HTTPLoad.Measurement) {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-httpbench-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            Output.error("bench http: ledger serve and ledger appstore-sim as processes of their own; their logs in \(folder.path)")
            // The scratch database is thrown away: its app's secret is sealed with a key of this run, handed to the server.
            let key = SecretSealer.generateKeyText()
            guard let secrets = try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": key]) else {
                throw CommandFailure(message: "bench http --apart: the key made for this run could not be read back; nothing was measured")
            }
            // This process signs the notifications; the server trusts its test root besides Apple's.
            let signer = SimulatorSignedPayloads(authority: try SimulatorCertificateAuthority())
            let root = folder.appendingPathComponent("notification-root.pem")
            try signer.authority.rootPEM().write(to: root, atomically: true, encoding: .utf8)

            let level = options.logLevel ?? "warning"
            let simulator = try await ChildServer.startSimulator(environment: environment.rawValue, logLevel: level,
                                                                 log: folder.appendingPathComponent("appstore-sim.log"))
            defer { simulator.stop() }
            let ledger = try await ChildServer.start(database: scratch, logLevel: level, log: folder.appendingPathComponent("serve.log"), environment: [
                "LEDGER_APPSTORE_PRODUCTION_URL": simulator.base + "/production/verifyReceipt",
                "LEDGER_APPSTORE_SANDBOX_URL": simulator.base + "/sandbox/verifyReceipt",
                "LEDGER_TRUST_SIMULATOR_ROOT": root.path,
                "LEDGER_SECRET_KEY": key,
                "LEDGER_SECRET_KEY_FILE": nil,
            ])
            defer { ledger.stop() }
            let simulatorPort = ServerPort(), ledgerPort = ServerPort()
            simulatorPort.report(simulator.port)
            ledgerPort.report(ledger.port)
            let load = HTTPLoadService(
                settings: scratch.runtime, secrets: secrets, load: HTTPLoad(http: http), simulatorPort: simulatorPort, ledgerPort: ledgerPort,
                receipts: receipts, reads: reads, workers: workers,
                cpu: CPUMeter.isAvailable ? CPUMeter(processes: [
                    ("bench (load)", getpid()), ("ledger serve", ledger.process.pid), ("appstore-sim", simulator.process.pid),
                ]) : nil,
                signer: signer, logger: logger
            )
            try await load.run()
            guard let measured = await load.results.value else { throw CommandFailure(message: "the load stopped before it measured") }
            if !keep { try? FileManager.default.removeItem(at: folder) }
            return measured
        }

        /// Milliseconds of CPU per request (per event for the appends) of each process, and how
        /// many of the machine's cores were busy meanwhile.
        private func printCPU(_ phases: [(name: String, cpu: [CPUMeter.Use], count: Int, seconds: Double)]) {
            guard phases.contains(where: { !$0.cpu.isEmpty }) else { return }
            Output.line("CPU ms per request (per event for the appends), from /proc; \(ProcessInfo.processInfo.activeProcessorCount) cores")
            for phase in phases where !phase.cpu.isEmpty && phase.count > 0 {
                let total = phase.cpu.reduce(0) { $0 + $1.seconds }
                let parts = phase.cpu.map { String(format: "%@ %.2f", $0.name, $0.seconds * 1_000 / Double(phase.count)) }
                Output.line("  " + phase.name.padding(toLength: 28, withPad: " ", startingAt: 0) + parts.joined(separator: ", ")
                    + String(format: "; total %.2f (%.2f cores busy)", total * 1_000 / Double(phase.count), total / phase.seconds))
            }
        }
    }
}

/// What the load measured, handed from its service to the command.
actor LoadResults {
    private(set) var value: (ingest: HTTPLoad.Measurement, read: HTTPLoad.Measurement, notifications: HTTPLoad.Measurement)?

    func set(ingest: HTTPLoad.Measurement, read: HTTPLoad.Measurement, notifications: HTTPLoad.Measurement) {
        value = (ingest, read, notifications)
    }
}

/// The App Store environment `bench http`'s test users buy in.
enum BenchEnvironment: String, ExpressibleByArgument, CaseIterable {
    case sandbox, production

    var store: StoreEnvironment { self == .sandbox ? .sandbox : .production }
}
