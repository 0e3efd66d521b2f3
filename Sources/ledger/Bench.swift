import ArgumentParser
import Foundation
import LedgerStore

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the ledger against a raw-SQL baseline in the same run.",
        subcommands: [Append.self]
    )

    struct Append: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Append synthetic purchase events through ledger.append, then INSERT the same rows raw.",
            discussion: """
                Runs in a scratch database <database>_bench on the same server, created afresh and dropped
                afterwards, so the real log is never touched. Prints events/s, append latency and the ratio.
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

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let scratch = settings.with(database: settings.database + "_bench")
            try await LedgerDatabase.recreate(database: scratch.database, on: settings, logger: logger)
            Output.error("bench: scratch database \(scratch.database); \(events) events, batch \(batch), \(concurrency) writers, \(streams) streams")
            let result = try await LedgerDatabase.withClient(scratch, maximumConnections: concurrency + 2, logger: logger) { client in
                try await Migrator.bundled().migrate(client, logger: logger)
                return try await AppendBenchmark(client: client, logger: logger).run(
                    .init(concurrency: concurrency, streams: streams, events: events, batch: batch)
                )
            }
            if !keep {
                try await LedgerDatabase.drop(database: scratch.database, on: settings, logger: logger)
            }
            func row(_ name: String, _ m: AppendBenchmark.Measurement) -> String {
                name.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + String(format: "%12.0f %10.2f %10.2f %9.2f", m.eventsPerSecond, m.p50, m.p99, m.seconds)
            }
            Output.line("append C=\(concurrency) streams=\(streams) events=\(events) batch=\(batch)")
            Output.line("                    events/s  p50 ms/op  p99 ms/op   total s")
            Output.line(row("ledger.append", result.ledger))
            Output.line(row("raw INSERT", result.baseline))
            Output.line(String(format: "ratio (ledger / raw): %.2f", result.ratio))
        }
    }
}
