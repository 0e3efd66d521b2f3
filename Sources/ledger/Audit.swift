import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
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
        subcommands: [Export.self, Summary.self, Unclassified.self, Metrics.self, Rates.self, Close.self, Reopen.self, Periods.self, Adjustments.self, Verify.self, Anchor.self, AnchorKey.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recompute every stream's hash chain, and compare the log with an anchor; exit 0 when intact, 1 when altered.",
            discussion: """
                Every event's hash covers its content and the previous event of its stream. A changed, \
                removed or re-hashed row breaks the chain; the first broken stream and position are printed.

                The chains cannot show a stream's last events removed, a stream removed whole, or events \
                rewritten with every later hash recomputed. With --anchor (a file from `ledger audit anchor`), \
                each stream the anchor names is checked against its anchored head, and the events at or \
                below the anchored log head are counted: every stream deleted, truncated or rewritten since \
                is named. Events appended after the anchor are fine.

                An anchor is trusted only when signed by the key you name (--public-key, or \
                LEDGER_ANCHOR_PUBLIC_KEY_FILE): whoever rewrites the log can re-anchor it with a key of \
                their own. --trust-embedded-key checks it against the key it carries instead, and says so.

                Exit status: 0 intact, 1 altered (or the check could not run), 3 the anchor cannot be \
                trusted (unreadable, changed after signing, signed by another key than --public-key, or \
                no --public-key given).
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: ArgumentHelp("An anchor written by `ledger audit anchor`: also find streams deleted, truncated or rewritten since it was taken.", valueName: "file"))
        var anchor: String?

        @Option(help: ArgumentHelp("The public key the anchor must be signed with: the FILE.pub of `ledger audit anchor-key` (default: $LEDGER_ANCHOR_PUBLIC_KEY_FILE). Required with --anchor unless --trust-embedded-key.", valueName: "file"))
        var publicKey: String?

        @Flag(help: "Check the anchor against the key it carries itself, with no key of yours: shows it was not changed after signing, not who signed it.")
        var trustEmbeddedKey = false

        /// The exit status for an anchor that cannot be trusted, apart from "the log was altered".
        static let untrustedAnchor = ExitCode(3)

        func validate() throws {
            if (publicKey != nil || trustEmbeddedKey) && anchor == nil {
                throw ValidationError("--public-key and --trust-embedded-key check an anchor's signature: give the anchor with --anchor FILE")
            }
            if publicKey != nil && trustEmbeddedKey {
                throw ValidationError("--public-key and --trust-embedded-key exclude each other: name the key you trust, or say you trust none")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let anchor = try loadAnchor()
            let settings = try await options.databaseSettings(logger: logger)
            let terminal = Output.errorIsTerminal
            let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                try await HashChainVerifier(client: client, logger: logger).verify(against: anchor, progressEvery: terminal ? 10_000 : 100_000) { checked, total in
                    let percent = total > 0 ? Double(checked) * 100 / Double(total) : 100
                    let line = "verified \(checked) of \(total) events (\(String(format: "%.1f", percent))%)"
                    if terminal {
                        Output.progress("\r" + line + (checked >= total ? "\n" : ""))
                    } else {
                        Output.error(line)
                    }
                }
            }
            if let first = report.firstBreak {
                Output.line("log ALTERED: first break in \(first)")
                Self.printSome(report.breaks.dropFirst().map(\.description), prefix: "also broken: ", more: "broken streams")
                Output.line("\(report.breaks.count) of \(report.streamsChecked) streams broken; \(report.eventsChecked) events checked")
            }
            if let compared = report.anchor {
                Self.printAnchor(compared)
            }
            guard report.isIntact else { throw ExitCode(1) }
            if report.anchor == nil {
                Output.line("log intact: \(report.eventsChecked) events in \(report.streamsChecked) streams, every hash chain verified")
                Output.error("without an anchor, a stream's last events or a whole stream removed would not show: see `ledger audit anchor`")
            } else {
                Output.line("log intact: \(report.eventsChecked) events in \(report.streamsChecked) streams, every hash chain verified and every anchored stream head in place")
            }
        }

        /// The anchor, checked, or nil when none was asked for; exits with status 3 when it cannot be trusted.
        private func loadAnchor() throws -> LogAnchor? {
            guard let path = anchor else { return nil }
            let keyPath = publicKey ?? (trustEmbeddedKey ? nil : ProcessInfo.processInfo.environment["LEDGER_ANCHOR_PUBLIC_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 })
            guard keyPath != nil || trustEmbeddedKey else {
                Output.error("error: the anchor \(path) is trusted only against a key you name: pass --public-key FILE.pub (the one `ledger audit anchor-key` wrote), or set LEDGER_ANCHOR_PUBLIC_KEY_FILE; whoever rewrote the log could have signed a new anchor with a key of their own. --trust-embedded-key checks it against the key it carries, knowing that")
                throw Self.untrustedAnchor
            }
            do {
                let trusted = try keyPath.map { path throws(LogAnchorError) in try AnchorPublicKey.load(from: path) }
                let loaded = try LogAnchor.load(from: path, trusting: trusted)
                let summary = loaded.summary
                Output.line("anchor \(path): taken \(summary.createdAt) at log position \(summary.logHeadPosition), \(summary.eventCount) events in \(summary.streamCount) streams")
                switch loaded.trust {
                case .trustedKey:
                    Output.line("anchor signature valid: signed by the trusted key \(summary.publicKey.fingerprint) (\(keyPath ?? ""))")
                case .embeddedKeyOnly:
                    Output.line("anchor signature valid for the key the anchor itself carries, \(summary.publicKey.fingerprint), which is NOT checked against a key you trust")
                    Output.error("warning (--trust-embedded-key): that shows the anchor is intact as signed, not that you made it: pass --public-key FILE.pub (or set LEDGER_ANCHOR_PUBLIC_KEY_FILE) to trust only your key")
                }
                return loaded
            } catch {
                Output.error("error: \(error.message)")
                throw Self.untrustedAnchor
            }
        }

        private static func printAnchor(_ compared: LogAnchorReport) {
            if compared.isIntact {
                Output.line("anchor holds: all \(compared.anchor.streamCount) anchored streams reach their anchored heads unchanged; the \(compared.anchor.eventCount) events at or below position \(compared.anchor.logHeadPosition) are all there")
                return
            }
            Output.line("log ALTERED since the anchor of \(compared.anchor.createdAt):")
            printSome(compared.findings.map(\.description), prefix: "", more: "changed streams")
            if let counted = compared.eventCountFinding {
                Output.line("  \(counted)")
            }
            let kinds = Dictionary(grouping: compared.findings) { finding in
                switch finding.kind {
                case .deleted: "deleted"
                case .truncated: "truncated"
                case .rewritten: "rewritten"
                case .anchoredEventRemoved: "missing their anchored event"
                }
            }
            let counts = kinds.sorted { $0.key < $1.key }.map { "\($0.value.count) \($0.key)" }.joined(separator: ", ")
            Output.line("\(compared.findings.count) of \(compared.anchor.streamCount) anchored streams changed\(counts.isEmpty ? "" : " (\(counts))")")
        }

        /// The first 20 lines, and how many more there are.
        private static func printSome(_ lines: [String], prefix: String, more: String) {
            for line in lines.prefix(20) {
                Output.line("  \(prefix)\(line)")
            }
            if lines.count > 20 {
                Output.line("  … and \(lines.count - 20) more \(more)")
            }
        }
    }
}
