import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LedgerTesting
import LocalPostgres
import Logging

@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger-bench",
        abstract: "Benchmarks of the ledger against raw-SQL baselines in the same run, the history seeder and the fuzzer.",
        discussion: """
            Not part of the shipped `ledger`: build it in release mode for figures (`swift run -c release ledger-bench …`). \
            Benchmarks that run `ledger serve` or `ledger appstore-sim` as processes of their own find `ledger` beside this program.
            """,
        subcommands: [
            Append.self, Seed.self, History.self, Catalog.self, Rebuild.self, Verify.self, Signed.self, Load.self, Reads.self, Fuzz.self,
            FaultyServe.self, Sync.self, Reconcile.self, Metrics.self, Follow.self,
        ]
    )

    static func main() async {
        await runReportingDatabaseErrors()
    }

    struct Seed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a realistic synthetic history through the real decision path.",
            discussion: """
                Apps com.example.seed0… with every product type; users buy, consume, subscribe and renew, re-buy and \
                restore on other devices, finish transactions, get refunds and post duplicate receipts. The same \
                --seed writes the same history. It writes into the configured database (not a scratch one), \
                which must hold no app but the seeder's own: synthetic purchases are never mixed into real \
                ones unless --into-existing says so.
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Number of apps.") var apps = 3
        @Option(help: "Number of users, spread over the apps.") var users = 1_000
        @Option(help: "Events to write in all (at least; every user lives one round however few are asked).") var events = 100_000
        @Option(help: "Concurrent writers.") var concurrency = 16
        @Option(help: "Random seed.") var seed: UInt64 = 42
        @Flag(help: "Seed even a database that holds apps other than the seeder's (com.example.seed…).") var intoExisting = false

        func validate() throws {
            guard apps >= 1, users >= 1, events >= 1, concurrency >= 1 else {
                throw ValidationError("--apps, --users, --events and --concurrency must all be at least 1")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let terminal = Output.errorIsTerminal
            let (apps, users, events, concurrency, seed) = (apps, users, events, concurrency, seed)
            let started = ContinuousClock.now
            let intoExisting = intoExisting
            let written = try await LedgerDatabase.withClient(roles.runtime, maximumConnections: concurrency + 4, logger: logger) { client in
                let others = try await AppRegistry(client: client, logger: logger).bundleIDs().filter { !$0.hasPrefix("com.example.seed") }
                guard others.isEmpty || intoExisting else {
                    throw CommandFailure(message: "this database holds apps of its own (\(others.prefix(3).joined(separator: ", "))\(others.count > 3 ? ", …" : "")): seeding would mix synthetic purchases into theirs. Seed a scratch database (LEDGER_DATABASE_URL, or LEDGER_HOME for a managed one of its own), or pass --into-existing")
                }
                return try await HistorySeeder(ledger: PostgresLedger(client: client, logger: logger), logger: logger).run(
                    .init(apps: apps, users: users, events: events, concurrency: concurrency, seed: seed)
                ) { progress in
                    let seconds = Double(progress.elapsed.components.seconds) + Double(progress.elapsed.components.attoseconds) / 1e18
                    let line = String(format: "seeded %d of %d events (%.0f events/s)", progress.events, progress.target,
                                      seconds > 0 ? Double(progress.events) / seconds : 0)
                    if terminal { Output.progress("\r" + line) } else { Output.error(line) }
                }
            }
            if terminal { Output.error("") }
            let elapsed = started.duration(to: .now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            Output.line(String(format: "seeded %d events for %d users of %d apps in %.1f s", written, users, apps, seconds))
        }
    }

    struct Rebuild: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Time `projections rebuild --all` against a raw scan-and-COPY baseline, in the same run.",
            discussion: "Rebuilds (and switches) every projection of the configured database; seed it first with `ledger-bench seed`."
        )

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let terminal = Output.errorIsTerminal
            // The raw-SQL baseline writes a table of its own: it runs as the owner when one is known.
            let result = try await LedgerDatabase.withClient(roles.owner ?? roles.runtime, logger: logger) { client in
                try await RebuildBenchmark(client: client, logger: logger).run { progress in
                    if terminal {
                        Output.progress("\rscanned \(progress.events) events")
                    }
                }
            }
            if terminal { Output.error("") }
            Output.line("rebuild --all over \(result.events) events")
            Output.line(String(format: "raw scan + COPY   %10.0f events/s  (%.2f s)", result.baselineRate, result.baselineSeconds))
            Output.line(String(format: "rebuild --all     %10.0f events/s  (%.2f s)", result.rebuildRate, result.rebuildSeconds))
            Output.line(String(format: "ratio (rebuild / raw): %.2f", result.ratio))
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify receipts through the App Store client against a local simulator, 16 at a time.",
            discussion: """
                Starts an App Store simulator on a free 127.0.0.1 port, sells one consumable to each test user, \
                then verifies every user's receipt through the real client. Reports receipts/s, the end-to-end \
                latency, the simulator's own handling time and what the client adds (end-to-end minus handling).
                """
        )

        @Option(help: "Receipts to verify (one per test user).")
        var receipts = 5_000

        @Option(help: "Requests in flight.")
        var concurrency = 16

        @Option(help: "Log level (default: warning, so that the figures stand alone).")
        var logLevel = "warning"

        func run() async throws {
            guard let level = Logger.Level(rawValue: logLevel) else {
                throw CommandFailure(message: "log level '\(logLevel)' is not one of trace, debug, info, notice, warning, error, critical")
            }
            LoggingBootstrap.once(level: level)
            var logger = Logger(label: "ledger")
            logger.logLevel = level
            let result = try await ReceiptVerificationBenchmark(logger: logger).run(
                .init(users: receipts, concurrency: concurrency)
            )
            Output.line("verify receipts=\(result.receipts) concurrency=\(result.concurrency)")
            Output.line(String(format: "receipts/s: %.0f (%.2f s)", result.receiptsPerSecond, result.seconds))
            Output.line("                   p50 ms    p99 ms")
            for (name, value) in [("end to end", result.endToEnd), ("simulator", result.server), ("client adds", result.clientAdded)] {
                Output.line(name.padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: "%9.3f %9.3f", value.p50, value.p99))
            }
        }
    }

    struct Signed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "jws",
            abstract: "Verify App Store signed payloads (StoreKit 2 JWS) against the bare ES256 check of the same signatures.",
            discussion: """
                Signs StoreKit 2 transactions with the simulator's test certificate authority (a chain shaped like \
                Apple's), then verifies each through SignedPayloadVerifier: x5c chain to the trusted root at the \
                payload's signedDate, Apple's marker extensions, ES256, bundle id and environment. The chain is \
                validated once (reported as "first") and remembered. Baseline: P-256 signature checks of the same \
                payloads with the key already parsed. Prints p50/p99 in microseconds, rates, and the ratio.
                """
        )

        @Option(help: "Signed payloads to verify.")
        var payloads = 20_000

        @Option(help: "Verifications in flight for the concurrent rate.")
        var concurrency = 16

        func run() async throws {
            let result = try await SignedPayloadBenchmark().run(.init(payloads: payloads, concurrency: concurrency))
            Output.line("jws payloads=\(result.payloads) (first verification, which validates the chain: \(String(format: "%.0f", result.firstMicroseconds)) µs)")
            Output.line("                        p50 µs    p99 µs   per second")
            for (name, figures) in [("verify (chain kept)", result.verify), ("bare ES256 check", result.bareSignature)] {
                Output.line(name.padding(toLength: 20, withPad: " ", startingAt: 0)
                    + String(format: "%10.1f %9.1f %12.0f", figures.p50, figures.p99, figures.perSecond))
            }
            Output.line(String(format: "verify at concurrency %d: %.0f per second", result.concurrency, result.concurrentPerSecond))
            Output.line(String(format: "ratio verify/bare: %.2f", result.verify.perSecond / result.bareSignature.perSecond))
        }
    }

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recover missed App Store notifications from the simulator's notification history, against a raw walk of the same pages.",
            discussion: """
                Runs in a scratch database <database>_bench on the same server (dropped afterwards) with the App Store \
                simulator in this process, on loopback. The simulator signs --notifications ONE_TIME_CHARGE \
                notifications and never delivers them; a first walk records all but --missing of them, the missing ones \
                are sent, then the timed walk (`ledger appstore sync`'s) covers the whole window: it must record the \
                missing ones and nothing else. Baseline: the same pages fetched with the same token, payloads decoded \
                without verification, one SELECT of the deduplication keys per page, the missing INSERTed into a plain \
                table. Prints both times and the ratio.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "Notifications in Apple's history.")
        var notifications = 10_000

        @Option(help: "Of those, the ones the log lacks before the timed walk.")
        var missing = 100

        @Flag(help: "Keep the scratch database for inspection.")
        var keep = false

        func run() async throws {
            let (notifications, missing) = (notifications, missing)
            let result = try await options.withScratchDatabase(keep: keep, "\(notifications) notifications, \(missing) missing") { client, logger in
                try await NotificationSyncBenchmark(client: client, logger: logger).run(.init(notifications: notifications, missing: missing))
            }
            Output.line("sync notifications=\(result.notifications) missing=\(missing)")
            Output.line(String(format: "first walk: recorded %d in %.1f s", result.primed, result.primingSeconds))
            Output.line("                         seen  recorded   seconds")
            Output.line("ledger sync         " + String(format: "%10d %9d %9.2f", result.seen, result.recovered, result.seconds))
            Output.line("raw walk            " + String(format: "%10d %9d %9.2f", result.baselineSeen, result.baselineInserted, result.baselineSeconds))
            Output.line(String(format: "ratio (sync / raw): %.2f", result.ratio))
            guard result.recovered == missing, result.seen == result.notifications else {
                throw CommandFailure(message: "the walk recorded \(result.recovered) of \(missing) missing and saw \(result.seen) of \(result.notifications)")
            }
        }
    }

    struct Metrics: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A year of subscription metrics and a month's close for a large app, against the rows they read in one SQL statement.",
            discussion: """
                Runs in a scratch database <database>_bench on the same server (dropped afterwards). Writes a year (2025) of \
                --subscribers monthly subscriptions straight into the live audit table (a tenth with a free trial, a twentieth \
                stopping mid-year, two currencies, one renewal in a hundred refunded), with the fold's judgements filled in, then \
                times `ledger audit metrics` for the year by month against the same rows aggregated by month and currency in one \
                statement (best of 3), the same metrics as of an instant (rebuilt from the rows, once), and `ledger audit close` \
                of June against its totals in one statement (best of 3).
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "Subscribers.")
        var subscribers = 100_000

        @Flag(help: "Keep the scratch database for inspection.")
        var keep = false

        func run() async throws {
            let subscribers = subscribers
            let result = try await options.withScratchDatabase(keep: keep, "\(subscribers) subscribers") { client, logger in
                try await MetricsBenchmark(client: client, logger: logger).run(subscribers: subscribers) { Output.error("bench: \($0)") }
            }
            Output.line("metrics subscribers=\(result.subscribers) rows=\(result.rows)")
            Output.line(String(format: "ledger audit metrics (year)  %6.2f s", result.metricsSeconds))
            Output.line(String(format: "one SQL aggregation          %6.2f s", result.metricsBaselineSeconds))
            Output.line(String(format: "ratio (metrics / SQL): %.2f", result.metricsSeconds / result.metricsBaselineSeconds))
            Output.line(String(format: "the same, as of an instant   %6.2f s  (rebuilt from the rows)", result.metricsAsOfSeconds))
            Output.line(String(format: "ledger audit close (month)   %6.2f s  (%d rows)", result.closeSeconds, result.closeRows))
            Output.line(String(format: "one SQL summary of the month %6.2f s", result.closeBaselineSeconds))
            Output.line(String(format: "ratio (close / SQL): %.2f", result.closeSeconds / result.closeBaselineSeconds))
        }
    }

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reconcile a month of a large app with Apple's sales reports, against the same aggregation in one SQL statement.",
            discussion: """
                Runs in a scratch database <database>_bench on the same server (dropped afterwards). Writes --transactions \
                purchases over 30 days straight into the live audit table (20 products, 12 storefronts and their \
                currencies, 2 % refunded, 1 % sandbox), imports Apple's 30 daily reports made from the same sales plus a \
                sale Apple alone knows in about one line in a hundred, then times `ledger reports reconcile` for the month \
                (best of 3) against the grouping of the audit table it starts from, as one statement (best of 3).
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "Purchases in the month.")
        var transactions = 1_000_000

        @Flag(help: "Keep the scratch database for inspection.")
        var keep = false

        func run() async throws {
            let transactions = transactions
            let result = try await options.withScratchDatabase(keep: keep, "\(transactions) transactions") { client, logger in
                try await ReconciliationBenchmark(client: client, logger: logger).run(transactions: transactions) { Output.error("bench: \($0)") }
            }
            Output.line("reconcile transactions=\(result.transactions) report_lines=\(result.reportLines)")
            Output.line(String(format: "ledger reports reconcile   %6.2f s  (%d rows, %d differ)", result.seconds, result.rows, result.differing))
            Output.line(String(format: "one SQL aggregation        %6.2f s  (%d groups)", result.baselineSeconds, result.baselineGroups))
            Output.line(String(format: "ratio (reconcile / SQL): %.2f", result.ratio))
            Output.line(String(format: "ledger audit summary       %6.2f s  (%d rows, with proceeds)", result.summarySeconds, result.summaryRows))
            Output.line(String(format: "one SQL summary            %6.2f s  (no proceeds)", result.summaryBaselineSeconds))
            Output.line(String(format: "ratio (summary / SQL): %.2f", result.summaryRatio))
        }
    }

    struct Append: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Append synthetic purchase events through ledger.append, then INSERT the same rows raw, twice.",
            discussion: """
                Runs in a scratch database <database>_bench on the same server, created afresh and dropped \
                afterwards, so the real log is never touched. The raw rows go into a table with a primary \
                key only, then into one indexed as ledger.events is (its indexes copied), so the index tax \
                and the log's own cost read apart. Prints events/s, latency per append and the ratios.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "Concurrent writers.")
        var concurrency = 16

        @Option(help: "Number of streams the events are spread over (fewer than writers: they contend).")
        var streams = 1_000

        @Option(help: "Events to append in all.")
        var events = 20_000

        @Option(help: "Events per append (one transaction).")
        var batch = 1

        @Flag(help: "Keep the scratch database for inspection.")
        var keep = false

        func validate() throws {
            guard concurrency >= 1, streams >= 1, events >= 1, batch >= 1 else {
                throw ValidationError("--concurrency, --streams, --events and --batch must all be at least 1")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            let scratch = try await roles.recreate(database: roles.runtime.database + "_bench", logger: logger)
            Output.error("bench: scratch database \(scratch.runtime.database); \(events) events, batch \(batch), \(concurrency) writers, \(streams) streams")
            // The raw-SQL baseline writes a table of its own: it runs as the owner when one is known.
            let result = try await LedgerDatabase.withClient(scratch.owner ?? scratch.runtime, maximumConnections: concurrency + 2, logger: logger) { client in
                try await AppendBenchmark(client: client, logger: logger).run(
                    .init(concurrency: concurrency, streams: streams, events: events, batch: batch)
                )
            }
            if !keep {
                try await roles.drop(database: scratch.runtime.database, logger: logger)
            }
            func row(_ name: String, _ m: AppendBenchmark.Measurement) -> String {
                name.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + String(format: "%12.0f %10.2f %10.2f %9.2f", m.eventsPerSecond, m.p50, m.p99, m.seconds)
            }
            Output.line("append C=\(concurrency) streams=\(streams) events=\(events) batch=\(batch)")
            Output.line("                    events/s  p50 ms/op  p99 ms/op   total s")
            Output.line(row("ledger.append", result.ledger))
            Output.line(row("raw INSERT", result.baseline))
            Output.line(row("raw, indexed", result.indexed))
            Output.line(String(format: "ratio (ledger / raw): %.2f   (ledger / raw indexed as ledger.events): %.2f   (indexed / raw): %.2f",
                               result.ratio, result.indexedRatio, result.indexed.eventsPerSecond / result.baseline.eventsPerSecond))
        }
    }
}

extension GlobalOptions {
    /// Runs a benchmark in a scratch database `<database>_bench`, created afresh on the configured
    /// server, as its owner when one is known (baselines make tables of their own); dropped
    /// afterwards unless `keep`.
    func withScratchDatabase<Result: Sendable>(
        keep: Bool, _ what: String, _ body: @escaping @Sendable (DatabasePool, Logger) async throws -> Result
    ) async throws -> Result {
        let logger = try makeLogger()
        let roles = try await databaseRoles(logger: logger)
        let scratch = try await roles.recreate(database: roles.runtime.database + "_bench", logger: logger)
        Output.error("bench: scratch database \(scratch.runtime.database); \(what)")
        let result = try await LedgerDatabase.withClient(scratch.owner ?? scratch.runtime, logger: logger) { client in
            try await body(client, logger)
        }
        if !keep { try await roles.drop(database: scratch.runtime.database, logger: logger) }
        return result
    }
}
