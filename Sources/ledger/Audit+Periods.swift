import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

extension Audit {
    /// Runs `body` with the periods' use case, turning refusals into messages.
    static func withPeriods<Result: Sendable>(
        _ options: GlobalOptions, _ body: @escaping @Sendable (ClosePeriods) async throws -> Result
    ) async throws -> Result {
        do {
            return try await Reports.withLedger(options) { ledger in try await body(ledger.closePeriods) }
        } catch let error as PeriodError {
            throw CommandFailure(message: error.message)
        }
    }

    /// The anchor's private key of `--key`, else of `$LEDGER_ANCHOR_KEY_FILE`, and its path.
    static func signingKey(_ given: String?) throws -> (key: AnchorSigningKey, path: String) {
        guard let path = given ?? ProcessInfo.processInfo.environment["LEDGER_ANCHOR_KEY_FILE"], !path.isEmpty else {
            throw CommandFailure(message: "no signing key: pass --key FILE or set LEDGER_ANCHOR_KEY_FILE (create a key with `ledger audit anchor-key --out FILE`)")
        }
        do {
            return (try AnchorSigningKey.load(from: path), path)
        } catch {
            throw CommandFailure(message: error.message)
        }
    }

    static func printStatus(_ status: PeriodStatus) {
        Output.line("\(status.period) \(status.state.rawValue): [\(LedgerJSON.formatTimestamp(status.from)), \(LedgerJSON.formatTimestamp(status.to))) in \(status.timeZone)")
        Output.line("figures at log position \(status.closePosition); the close is the fact at position \(status.factPosition), signature \(status.signatureValid ? "valid" : "INVALID")")
        for line in status.history { Output.line("  \(line)") }
        Table.print(
            header: ["environment", "currency", "product", "purchases", "units", "gross", "refunds", "refunded", "net", "net proceeds", "source"],
            rows: status.figures.map { figure in
                [figure.environment.rawValue, figure.currency ?? "(unpriced)", figure.productId, String(figure.purchases), String(figure.units),
                 figure.gross, String(figure.refunds), figure.refundedAmount, figure.net,
                 figure.netProceeds.map { "\($0) \(figure.proceedsCurrency ?? "")" } ?? "unknown", figure.proceedsSource]
            }
        )
    }

    struct Close: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Close a month: freeze its audit figures as a signed fact in the log.",
            discussion: """
                Records PeriodClosed on the app's periods stream: the period's totals per environment, currency and product \
                (gross, refunds, net, proceeds where known), the log position they reflect, and the rows they add up (kept \
                in ledger.closed_period_rows), signed with the anchor key. From then on the period's figures are these; \
                what the ledger learns later that changes its rows is listed by `ledger audit adjustments`, booked in a \
                later period and naming its cause. A period is closed once it has ended, and once: reopen it first.
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("The month to close, yyyy-MM.", valueName: "yyyy-MM")) var period: String
        @Option(help: ArgumentHelp("The time zone the month is taken in (IANA name).", valueName: "zone")) var timeZone = "UTC"
        @Option(help: ArgumentHelp("The anchor's private key (default: $LEDGER_ANCHOR_KEY_FILE).", valueName: "file")) var key: String?
        @Option(help: ArgumentHelp("Who closes it, as the log should say.", valueName: "name")) var by: String = ProcessInfo.processInfo.environment["USER"] ?? "operator"

        func run() async throws {
            let signingKey = try Audit.signingKey(key).key
            let (app, period, zone, by) = (app, period, timeZone, by)
            let status = try await Audit.withPeriods(options) { periods in
                try await periods.close(app: app, period: period, timeZone: zone, closedBy: "cli:\(by)", signer: signingKey)
            }
            Audit.printStatus(status)
        }
    }

    struct Reopen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reopen a closed month, saying why; the close stays in the log.",
            discussion: "Until it is closed again, the month's figures are the audit trail's as they are now."
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("The month, yyyy-MM.", valueName: "yyyy-MM")) var period: String
        @Option(help: "Why it is reopened (kept in the log).") var reason: String
        @Option(help: ArgumentHelp("Who reopens it.", valueName: "name")) var by: String = ProcessInfo.processInfo.environment["USER"] ?? "operator"

        func run() async throws {
            let (app, period, reason, by) = (app, period, reason, by)
            let status = try await Audit.withPeriods(options) { periods in
                try await periods.reopen(app: app, period: period, reason: reason, reopenedBy: "cli:\(by)")
            }
            Audit.printStatus(status)
        }
    }

    struct Periods: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The app's closed (and reopened) months, or one month's frozen figures.",
            discussion: "Each close's signature is checked with the public key it names."
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("One month, yyyy-MM: its figures.", valueName: "yyyy-MM")) var period: String?
        @Flag(help: "JSON instead of text.") var json = false

        func run() async throws {
            let (app, period) = (app, period)
            let statuses = try await Audit.withPeriods(options) { periods in
                if let period {
                    guard let status = try await periods.status(app: app, period: period) else {
                        throw PeriodError(.periodNeverClosed, "\(period) was never closed")
                    }
                    return [status]
                }
                return try await periods.statuses(app: app)
            }
            if json {
                Output.line(String(decoding: try AdjustmentCSV.encoder.encode(["periods": statuses]), as: UTF8.self))
            } else if period != nil, let status = statuses.first {
                Audit.printStatus(status)
            } else if statuses.isEmpty {
                Output.line("no period of \(app) was ever closed: `ledger audit close --app \(app) --period yyyy-MM`")
            } else {
                Table.print(header: ["period", "state", "closed at", "by", "figures at position", "signature"], rows: statuses.map {
                    [$0.period, $0.state.rawValue, LedgerJSON.formatTimestamp($0.closedAt), $0.closedBy, String($0.closePosition), $0.signatureValid ? "valid" : "INVALID"]
                })
            }
        }
    }

    struct Adjustments: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "What the ledger learned after a month was closed that changes its figures, and why.",
            discussion: """
                Each row of the closed month the audit trail now has otherwise than the close kept: added (a refund dated \
                in the month, a late notification, a backfill), removed or changed (a later fact, a replay of a fixed fold), \
                with the month it is booked in (the first open when the ledger learned of it) and the fact that caused it.
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case table, csv, json
        }

        @OptionGroup var options: GlobalOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("The closed month, yyyy-MM.", valueName: "yyyy-MM")) var period: String
        @Option(help: "table, csv or json.") var format: Format = .table

        func run() async throws {
            let (app, period) = (app, period)
            let adjustments = try await Audit.withPeriods(options) { periods in try await periods.adjustments(app: app, period: period) }
            switch format {
            case .json:
                Output.line(String(decoding: try AdjustmentCSV.encoder.encode(["adjustments": adjustments]), as: UTF8.self))
            case .csv:
                Output.write(Data((AdjustmentCSV.header + adjustments.map(AdjustmentCSV.line).joined()).utf8))
            case .table:
                if adjustments.isEmpty { Output.line("no adjustments: \(period)'s rows are as they were closed"); return }
                Table.print(header: ["booked in", "kind", "event", "transaction", "product", "currency", "net change", "cause"], rows: adjustments.map {
                    [$0.bookedIn, $0.kind.rawValue, $0.event, $0.transactionId, $0.productId, $0.currency ?? "", $0.netChange, $0.cause.message]
                })
            }
        }
    }
}
