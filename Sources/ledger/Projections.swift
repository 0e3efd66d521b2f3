import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerProjections
import LedgerStore
import LocalPostgres

struct ProjectionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "projections",
        abstract: "Inspect the read models derived from the log.",
        subcommands: [Status.self, Rebuild.self]
    )

    struct Rebuild: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild projections from position 0 into new tables, then switch readers over atomically.",
            discussion: """
                The live version keeps serving while the rebuild runs. The switch never moves a checkpoint back, \
                and it waits for a long query on the projection's view to finish (up to 5 minutes) rather than \
                making the readers behind it wait. Interrupted at any point, a rebuild can simply be run again.

                With --dry-run nothing is switched: the rebuilt rows are compared with the live ones at the \
                same log position, and every added, removed or changed row is listed with its values before \
                and after. Use it after fixing a projection (and bumping its version) to see exactly whose \
                state changes.

                Projections: \(Projections.all.map { $0.name.rawValue }.joined(separator: ", ")).
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case text, json
        }

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The projection to rebuild.")
        var name: String?

        @Flag(help: "Rebuild every projection.")
        var all = false

        @Flag(help: "Build and compare with the live version; switch nothing.")
        var dryRun = false

        @Option(help: "Output of --dry-run: text or json.")
        var format: Format = .text

        func validate() throws {
            guard (name != nil) != all else {
                throw ValidationError("name one projection or give --all (projections: \(Projections.all.map { $0.name.rawValue }.joined(separator: ", ")))")
            }
            if let name, !Projections.all.contains(where: { $0.name.rawValue == name }) {
                throw ValidationError("there is no projection '\(name)'; there are: \(Projections.all.map { $0.name.rawValue }.joined(separator: ", "))")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let chosen = Projections.all.filter { all || $0.name.rawValue == name }
            let terminal = Output.errorIsTerminal
            let labels = chosen.map(Self.label)
            let dryRun = dryRun
            let reports = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                let rebuilder = ProjectionRebuilder(client: client, logger: logger)
                if !dryRun && chosen.count > 1 {
                    // One scan of the log for all of them.
                    let reports = try await rebuilder.rebuildAll(chosen) { progress in
                        Self.show(progress, label: "all projections", terminal: terminal)
                    }
                    if terminal { Output.error("") }
                    return reports
                }
                var reports: [ProjectionRebuilder.Report] = []
                for (projection, label) in zip(chosen, labels) {
                    let report = try await rebuilder.rebuild(projection, dryRun: dryRun) { progress in
                        Self.show(progress, label: label, terminal: terminal)
                    }
                    if terminal { Output.error("") }
                    reports.append(report)
                }
                return reports
            }
            if dryRun && format == .json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                struct Out: Encodable {
                    let projection: String
                    let version: Int
                    let liveVersion: Int?
                    let position: Int64
                    let differences: [ProjectionRebuilder.Difference]
                }
                let out = reports.map { Out(projection: $0.projection, version: $0.version, liveVersion: $0.liveVersion,
                                            position: $0.position, differences: $0.differences ?? []) }
                Output.line(String(decoding: try encoder.encode(out), as: UTF8.self))
                return
            }
            for report in reports {
                let rate = report.seconds > 0 ? Double(report.events) / report.seconds : 0
                if let differences = report.differences {
                    Output.line("\(report.projection) v\(report.version) (dry run) against live v\(report.liveVersion.map(String.init) ?? "none") at position \(report.position): \(differences.count) rows differ")
                    for difference in differences.prefix(1_000) {
                        for line in difference.lines { Output.line("  " + line) }
                    }
                    if differences.count > 1_000 { Output.line("  … \(differences.count - 1_000) more (use --format json)") }
                } else {
                    Output.line(String(format: "%@ v%d rebuilt from %d events in %.1f s (%.0f events/s) and live at position %lld",
                                       report.projection, report.version, report.events, report.seconds, rate, report.position))
                }
            }
        }

        static func label(_ projection: any UserProjection.Type) -> String {
            "\(projection.name) v\(projection.version)"
        }

        static func show(_ progress: ProjectionRebuilder.Progress, label: String, terminal: Bool) {
            let seconds = Double(progress.elapsed.components.seconds) + Double(progress.elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(progress.events) / seconds : 0
            let fraction = progress.head > 0 ? min(1, Double(progress.position) / Double(progress.head)) : 1
            let remaining = rate > 0 && fraction < 1 ? Double(progress.head - progress.position) / rate : 0
            if terminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                Output.progress(String(
                    format: "\r%@ [%@] %3.0f%%  %.0f events/s  ETA %.0fs ", label, bar, fraction * 100, rate, remaining
                ))
            } else {
                Output.error(String(format: "%@: position %lld of %lld, %d events, %.0f events/s, ETA %.0fs",
                                    label, progress.position, progress.head, progress.events, rate, remaining))
            }
        }

    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each projection version: status, checkpoint, lag in positions and seconds, and why it stopped if it did.",
            discussion: """
                Projections are kept up to date by `ledger serve`. The lag in positions is the log's head minus the \
                checkpoint (an upper bound on the events not applied yet); the lag in seconds is how long the \
                projection has been behind without its checkpoint moving (0 when caught up). A failed version is \
                tried again when `ledger serve` restarts, or replaced by `ledger projections rebuild NAME`. \
                Exit status 1 when any projection has failed.
                """
        )

        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let statuses = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                try await ProjectionStatus.all(client, logger: logger)
            }
            guard !statuses.isEmpty else {
                Output.line("no projection has run yet: `ledger serve` starts them")
                return
            }
            Output.line("log head \(statuses[0].head)")
            Output.line("name                    version  status    checkpoint  lag positions   lag s")
            for status in statuses {
                let followed = status.status == .live || status.status == .building
                Output.line(
                    status.name.padding(toLength: 24, withPad: " ", startingAt: 0)
                        + String(format: "%7d  ", status.version)
                        + status.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)
                        + String(format: "%12lld ", status.position)
                        + (followed ? String(format: "%14lld %7.1f", status.lagPositions, status.lagSeconds) : String(repeating: " ", count: 13) + "-       -")
                )
                if status.status == .failed, let error = status.error {
                    Output.line("    stopped at position \(status.errorPosition.map(String.init) ?? "?"): \(error)")
                }
            }
            if statuses.contains(where: { $0.status == .failed }) { throw ExitCode(1) }
        }
    }
}
