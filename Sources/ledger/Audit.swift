import ArgumentParser
import Foundation
import LedgerDomain
import LedgerStore
import LocalPostgres

struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finance's audit trail: export it, total it, and check the log's integrity.",
        discussion: """
            export and summary read ledger.audit_trail (kept by the projection runner of `ledger serve`): \
            one row per purchase, renewal and refund, dated by occurred_at (the purchase date, or for a \
            refund the refund date). Production rows only unless --environment sandbox or all: sandbox money is never revenue.
            """,
        subcommands: [Export.self, Summary.self, Unclassified.self, Verify.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recompute every stream's hash chain; exit 0 when intact, 1 when altered.",
            discussion: """
                Every event's hash covers its content and the previous event of its stream. A changed,
                removed or re-hashed row breaks the chain; the first broken stream and position are printed.
                """
        )

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let terminal = Output.errorIsTerminal
            let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                try await HashChainVerifier(client: client, logger: logger).verify(progressEvery: terminal ? 10_000 : 100_000) { checked, total in
                    let percent = total > 0 ? Double(checked) * 100 / Double(total) : 100
                    let line = "verified \(checked) of \(total) events (\(String(format: "%.1f", percent))%)"
                    if terminal {
                        FileHandle.standardError.write(Data(("\r" + line + (checked >= total ? "\n" : "")).utf8))
                    } else {
                        Output.error(line)
                    }
                }
            }
            guard let first = report.firstBreak else {
                Output.line("log intact: \(report.eventsChecked) events in \(report.streamsChecked) streams, every hash chain verified")
                return
            }
            Output.line("log ALTERED: first break in \(first)")
            for other in report.breaks.dropFirst().prefix(20) {
                Output.line("  also broken: \(other)")
            }
            if report.breaks.count > 21 {
                Output.line("  … and \(report.breaks.count - 21) more broken streams")
            }
            Output.line("\(report.breaks.count) of \(report.streamsChecked) streams broken; \(report.eventsChecked) events checked")
            throw ExitCode(1)
        }
    }
}
