import Foundation
import ArgumentParser
import LedgerBenchmarks
import LedgerCommandLine
import LedgerStore

extension Bench {
    struct Follow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Time following the ledger: the change writer, the feed through HTTP against raw SQL, webhook delivery.",
            discussion: """
                Over the configured database (seed it first with `ledger-bench seed`): the change writer catches up with \
                the whole log; one consumer reads the feed of the app with the most changes through HTTP in pages, and the \
                same keyset pages are read with one SQL statement each (the ratio); then a webhook endpoint on loopback \
                that answers 200 at once receives the app's last --deliveries changes. `bash Benchmarks/follow.sh` seeds \
                a scratch database and runs it.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "Changes per page of the feed.")
        var page = 1_000

        @Option(help: "The app's latest changes delivered to the webhook endpoint.")
        var deliveries = 5_000

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let result = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                try await FollowBenchmark(client: client, logger: logger).run(pageSize: page, deliveries: deliveries) { Output.error($0) }
            }
            Output.line(String(format: "change writer      %10.0f events/s  (%d events, %d changes, %.2f s)",
                               result.writerEventsPerSecond, result.writerEvents, result.writerChanges, result.writerSeconds))
            Output.line(String(format: "feed through HTTP  %10.0f changes/s (%d changes in %d pages of %d, %.2f s)",
                               result.feedRate, result.feedChanges, result.feedPages, page, result.feedSeconds))
            Output.line(String(format: "same pages in SQL  %10.0f changes/s (%.2f s)", result.rawRate, result.rawSeconds))
            Output.line(String(format: "ratio (feed / SQL): %.2f", result.feedRatio))
            if result.deliveries > 0 {
                Output.line(String(format: "webhook delivery   %10.0f changes/s (%d changes, %.2f s)", result.deliveryRate, result.deliveries, result.deliverySeconds))
            }
        }
    }
}
