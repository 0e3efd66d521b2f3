import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerStore

extension Audit {
    struct Rates: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Exchange rates for reading the metrics in one reporting currency.",
            discussion: """
                The metrics never add currencies; with --reporting-currency they also give each interval's figures in one \
                currency, at the rate of each currency on or before the interval's last day. The rates are the operator's: \
                import them from a CSV file, list them here.
                """,
            subcommands: [Import.self, List.self]
        )

        struct Import: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Import exchange rates from CSV files: every rate of every file, or none.",
                discussion: """
                    Each file starts with the header date,currency,reporting_currency,rate (any order), then one rate per line: \
                    on date (yyyy-MM-dd) one unit of currency is worth rate units of reporting_currency, e.g. \
                    2026-11-30,USD,EUR,0.9461. A rate given again for the same day replaces the earlier one. A file with \
                    anything wrong is refused with its line and column, and nothing of any file is recorded.
                    """
            )
            @OptionGroup var options: GlobalOptions
            @Argument(help: "CSV files of rates.") var files: [String]

            func validate() throws {
                guard !files.isEmpty else { throw ValidationError("name at least one CSV file of rates") }
            }

            func run() async throws {
                var rates: [ExchangeRate] = []
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file) else { throw CommandFailure(message: "\(file): cannot be read; nothing was imported") }
                    do {
                        rates += try ExchangeRate.parse(csv: String(decoding: data, as: UTF8.self))
                    } catch {
                        throw CommandFailure(message: "\(file): \(error.message); nothing was imported")
                    }
                }
                let all = rates
                let count = try await Reports.withLedger(options) { ledger in try await ledger.exchangeRates.set(all) }
                let pairs = Set(all.map { "\($0.currency)→\($0.reportingCurrency)" }).sorted()
                Output.line("\(count) rates imported (\(pairs.joined(separator: ", ")), from \(all.map(\.date).min() ?? "") to \(all.map(\.date).max() ?? ""))")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the exchange rates, as CSV in the import's format.")
            @OptionGroup var options: GlobalOptions
            @Option(help: ArgumentHelp("Only the rates into this currency.", valueName: "code")) var reportingCurrency: String?

            func run() async throws {
                let reporting = reportingCurrency?.uppercased()
                let rates = try await Reports.withLedger(options) { ledger in try await ledger.exchangeRates.rates(into: reporting) }
                Output.line("date,currency,reporting_currency,rate")
                for rate in rates { Output.line("\(rate.date),\(rate.currency),\(rate.reportingCurrency),\(rate.rate)") }
            }
        }
    }
}
