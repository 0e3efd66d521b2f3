import ArgumentParser
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LedgerTesting

extension Bench {
    struct Catalog: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Time how long a catalog edit holds the live projections of an app with many users.",
            discussion: """
                In a scratch database created afresh and dropped afterwards: --users users live one seeded round \
                each (as `bench seed` writes them), one in --buyers-every also buys gems.pack before the catalog \
                defines it, and every projection catches up. Then two edits, each timed from its append until \
                every projection is live at it again: a price change of coins.100, which every user bought (it \
                applies to later facts only), and the first definition of gems.pack (its earlier purchases are \
                classified with it). Prints the time, the transactions the projections wrote and the most rows \
                one of them wrote (at most 5,000, besides the old rows of users whose rows it replaced).
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Users of the app.") var users = 100_000
        @Option(help: "One user in this many buys gems.pack before it is defined.") var buyersEvery = 100
        @Option(help: "Concurrent writers while seeding.") var concurrency = 16
        @Flag(help: "Keep the scratch database for inspection.") var keep = false

        func validate() throws {
            guard users >= 1, buyersEvery >= 1, concurrency >= 1 else {
                throw ValidationError("--users, --buyers-every and --concurrency must all be at least 1")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            let scratch = try await roles.recreate(database: roles.runtime.database + "_catalog", logger: logger)
            let listen = try scratch.runtime.connectionConfiguration
            let terminal = Output.errorIsTerminal
            Output.error("bench catalog: \(users) users, one in \(buyersEvery) buys gems.pack first, in \(scratch.runtime.database)")
            let settings = CatalogChangeBenchmark.Options(users: users, buyersEvery: buyersEvery, concurrency: concurrency)
            let result = try await LedgerDatabase.withClient(scratch.runtime, maximumConnections: concurrency + 8, logger: logger) { client in
                try await CatalogChangeBenchmark(logger: logger).run(settings, client: client, listen: listen) { stage in
                    switch stage {
                    case .seeded(let written, let target):
                        if terminal { Output.progress("\rseeded \(written) events (at least \(target))") }
                    case .catchingUp(let written):
                        if terminal { Output.error("") }
                        Output.error("catching up \(written) events with every projection")
                    case .changing(let name):
                        Output.error(name)
                    }
                }
            }
            if !keep { try await roles.drop(database: scratch.runtime.database, logger: logger) }
            Output.line("catalog change: \(result.users) users, \(result.events) events")
            Output.line(String(format: "seeded in %.1f s; every projection caught up in %.1f s", result.seedSeconds, result.catchUpSeconds))
            Output.line("                                                   buyers  back at head s  transactions     rows  largest")
            for change in result.changes {
                Output.line(change.name.padding(toLength: 50, withPad: " ", startingAt: 0)
                    + String(format: "%7d %15.3f %13d %8d %8d", change.buyers, change.seconds, change.transactions, change.rows, change.largestRows))
            }
        }
    }
}
