import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

extension Audit {
    struct Metrics: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "MRR, active subscriptions and their movement, trials, churn, refund rates and cohorts, per interval and currency.",
            discussion: """
                From the audit trail's rows recorded up to --as-of (default now); never added across currencies, production \
                unless --environment sandbox. One definition per figure: docs/finance.md, Subscription metrics.
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case table, json
        }

        @OptionGroup var options: GlobalOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("Start, ISO 8601 (e.g. 2026-01-01T00:00:00Z).", valueName: "time")) var from: String
        @Option(help: ArgumentHelp("End, not included, ISO 8601.", valueName: "time")) var to: String
        @Option(help: "month or day.") var interval = "month"
        @Option(help: ArgumentHelp("The intervals' time zone (IANA).", valueName: "zone")) var timeZone = "UTC"
        @Option(help: "production or sandbox.") var environment = "production"
        @Option(help: ArgumentHelp("The figures as the log stood at this instant, ISO 8601.", valueName: "time")) var asOf: String?
        @Option(help: ArgumentHelp("Also give the figures in this currency (ISO 4217), at the rates `ledger audit rates import` keeps.",
                                   valueName: "code")) var reportingCurrency: String?
        @Option(help: "table or json.") var format: Format = .table

        func run() async throws {
            func time(_ text: String, _ name: String) throws -> Date {
                guard let date = LedgerJSON.parseTimestamp(text) else {
                    throw ValidationError("\(name) '\(text)' is not an ISO 8601 time such as 2026-01-01T00:00:00Z")
                }
                return date
            }
            let (start, end) = (try time(from, "--from"), try time(to, "--to"))
            let instant = try asOf.map { try time($0, "--as-of") }
            guard interval == "month" || interval == "day" else { throw ValidationError("--interval is month or day, not '\(interval)'") }
            guard let store = StoreEnvironment(rawValue: environment) else {
                throw ValidationError("--environment is production or sandbox, not '\(environment)'")
            }
            let (app, byMonth, zone, reportingCurrency) = (app, interval == "month", timeZone, reportingCurrency?.uppercased())
            let report = try await Reports.withLedger(options) { ledger in
                try await ledger.metrics.metrics(app: app, environment: store, from: start, to: end, byMonth: byMonth, timeZone: zone, asOf: instant,
                                                 reportingCurrency: reportingCurrency)
            }
            if format == .json {
                Output.line(String(decoding: try AdjustmentCSV.encoder.encode(report), as: UTF8.self))
                return
            }
            Output.line("\(report.app), \(report.environment), by \(report.interval) in \(report.timeZone), as of \(LedgerJSON.formatTimestamp(report.asOf))")
            Table.print(
                header: ["interval", "currency", "MRR", "active at start", "active at end", "new", "renewed", "reactivated", "churned", "churn rate",
                         "upgraded", "downgraded", "trials started", "converted", "expired"],
                rows: report.subscriptions.map {
                    [$0.interval, $0.currency, $0.mrr, String($0.activeAtStart), String($0.activeAtEnd), String($0.new), String($0.renewed),
                     String($0.reactivated), String($0.churned), $0.churnRate ?? "–", String($0.upgraded), String($0.downgraded),
                     String($0.trialsStarted), String($0.trialsConverted), String($0.trialsExpired)]
                }
            )
            Output.line("")
            Table.print(header: ["interval", "currency", "payments", "refunds", "gross", "refunded", "refund rate (count)", "refund rate (amount)",
                                 "basis"],
                        rows: report.refunds.map {
                            [$0.interval, $0.currency, String($0.payments), String($0.refunds), $0.gross, $0.refunded, $0.refundRateByCount ?? "–",
                             $0.refundRateByAmount ?? "–",
                             $0.basis == .closed ? "closed \($0.closedAt.map(LedgerJSON.formatTimestamp) ?? ""), \($0.adjustments ?? 0) adjustments" : "live"]
                        })
            Output.line("")
            Table.print(header: ["cohort", "months since", "currency", "users", "net"], rows: report.cohorts.map {
                [$0.cohort, String($0.monthsSince), $0.currency, String($0.users), $0.net]
            })
            guard let converted = report.converted else { return }
            Output.line("")
            Output.line("In \(converted.currency), at the operator's exchange rates (the rate on or before each interval's last day):")
            Table.print(header: ["interval", "MRR", "active at end", "new", "churned", "gross", "refunded"], rows: converted.subscriptions.map { row in
                let money = converted.refunds.first { $0.interval == row.interval }
                return [row.interval, row.mrr, String(row.activeAtEnd), String(row.new), String(row.churned), money?.gross ?? "–", money?.refunded ?? "–"]
            })
            Table.print(header: ["interval", "currency", "rate", "rate of"], rows: converted.rates.map { [$0.interval, $0.currency, $0.rate, $0.rateDate] })
            for missing in converted.unconverted {
                Output.line("\(missing.interval): no rate of \(missing.currency) into \(converted.currency) on or before the interval's last day; its figures are left out of these totals")
            }
        }
    }
}
