import ArgumentParser
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LedgerTesting

extension Bench {
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare short and long user histories: events/s of writes and of projection catch-up.",
            discussion: """
                Writes --events events through the real decision path (as `bench seed` does) twice, each time \
                into a scratch database created afresh and dropped afterwards: once for users with --short events \
                each, once for users with --long events each, with the same number of writers (at most one per \
                user of the long run). After each, a fresh projection runner catches every projection up from \
                nothing to the head, as `ledger serve` does on start. Prints events/s of both and the ratios \
                long / short: 1.0 means a user's history length costs nothing. Also the writers' commands/s \
                and events per command (each command one read, decision and append): a long history's later \
                rounds append fewer events per command than a user's first round, so its events/s ratio \
                is lower than its commands/s ratio.
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Events to write in each run.") var events = 100_000
        @Option(help: "Events per user in the short run.") var short = 10
        @Option(help: "Events per user in the long run.") var long = 10_000
        @Option(help: "Writers at most (fewer when the long run has fewer users).") var concurrency = 16
        @Flag(help: "Keep the scratch databases for inspection.") var keep = false

        func validate() throws {
            guard events >= 1, short >= 1, long >= 1, concurrency >= 1 else {
                throw ValidationError("--events, --short, --long and --concurrency must all be at least 1")
            }
            guard short < long, long <= events else {
                throw ValidationError("--short (\(short)) must be below --long (\(long)), and --long at most --events (\(events))")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            let benchmark = HistoryLengthBenchmark(logger: logger)
            let settings = HistoryLengthBenchmark.Options(events: events, shortHistory: short, longHistory: long, concurrency: concurrency)
            let terminal = Output.errorIsTerminal
            var runs: [HistoryLengthBenchmark.Run] = []
            for (name, perUser) in [("short", short), ("long", long)] {
                let scratch = try await roles.recreate(database: roles.runtime.database + "_history_\(name)", logger: logger)
                let listen = try scratch.runtime.connectionConfiguration
                let run = try await LedgerDatabase.withClient(scratch.runtime, maximumConnections: settings.writers + 8, logger: logger) { client in
                    try await benchmark.run(settings, perUser: perUser, client: client, listen: listen) { stage in
                        switch stage {
                        case .seeding(let users, let perUser):
                            Output.error("bench history: \(users) users × \(perUser) events, \(settings.writers) writers, in \(scratch.runtime.database)")
                        case .seeded(let written, let target):
                            if terminal { Output.progress("\rseeded \(written) of \(target) events") }
                        case .catchingUp(let written):
                            if terminal { Output.error("") }
                            Output.error("catching up \(written) events with every projection")
                        }
                    }
                }
                runs.append(run)
                if !keep { try await roles.drop(database: scratch.runtime.database, logger: logger) }
            }
            let (shortRun, longRun) = (runs[0], runs[1])
            func row(_ name: String, _ run: HistoryLengthBenchmark.Run) -> String {
                name.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + String(format: "%7d %9d %12.0f %13.0f %11.0f %10.2f", run.users, run.events, run.seedRate, run.catchUpRate,
                             run.commandRate, Double(run.events) / Double(max(1, run.commands)))
            }
            Output.line("history length: \(events) events, \(settings.writers) writers")
            Output.line("                         users    events  writes ev/s  catch-up ev/s  commands/s  ev/command")
            Output.line(row("\(short) events per user", shortRun))
            Output.line(row("\(long) events per user", longRun))
            Output.line(String(format: "ratio (long / short): writes %.2f, catch-up %.2f; commands %.2f (a long history's rounds append fewer events per command)",
                               longRun.seedRate / shortRun.seedRate, longRun.catchUpRate / shortRun.catchUpRate,
                               longRun.commandRate / shortRun.commandRate))
            Output.line(String(format: "users' events read to fold them, per event caught up: %.2f short, %.2f long",
                               Double(shortRun.catchUpEventsRead) / Double(shortRun.events), Double(longRun.catchUpEventsRead) / Double(longRun.events)))
        }
    }
}
