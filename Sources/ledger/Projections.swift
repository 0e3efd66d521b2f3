import ArgumentParser
import Foundation
import LedgerStore

struct ProjectionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "projections",
        abstract: "Inspect the read models derived from the log.",
        subcommands: [Status.self]
    )

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each projection version: status, checkpoint, lag in events and seconds, and why it stopped if it did.",
            discussion: "Projections are kept up to date by `ledger serve`. Exit status 1 when any projection has failed."
        )

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let statuses = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                try await Migrator.bundled().migrate(client, logger: logger)
                return try await ProjectionStatus.all(client, logger: logger)
            }
            guard !statuses.isEmpty else {
                Output.line("no projection has run yet: `ledger serve` starts them")
                return
            }
            Output.line("name                    version  status    checkpoint   lag events   lag s")
            for status in statuses {
                Output.line(
                    status.name.padding(toLength: 24, withPad: " ", startingAt: 0)
                        + String(format: "%7d  ", status.version)
                        + status.status.padding(toLength: 8, withPad: " ", startingAt: 0)
                        + String(format: "%12lld %12lld %7.1f", status.position, status.lagEvents, status.lagSeconds)
                )
                if let error = status.error {
                    Output.line("    stopped at position \(status.errorPosition.map(String.init) ?? "?"): \(error)")
                }
            }
            if statuses.contains(where: { $0.status == "failed" }) { throw ExitCode(1) }
        }
    }
}
