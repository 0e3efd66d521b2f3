import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

extension Audit {
    struct Summary: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Totals of the audit trail: purchases, units, gross, refunds and net, per currency.",
            discussion: """
                Amounts are never added across currencies: currency is always a grouping. Refunds are counted \
                on the day they occurred and subtracted only in net. unpriced counts rows without a price \
                (not in any amount); their currency is empty. Production only unless --environment says \
                sandbox or all; with all, every total is broken down by environment, never added together.
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case table, csv, json
        }

        @OptionGroup var options: GlobalOptions
        @OptionGroup var filter: Filter

        @Option(help: ArgumentHelp("Break down by any of day (UTC), product, currency, environment, storefront (the buyer's country), comma-separated.", valueName: "keys"))
        var groupBy: String?

        @Option(help: "table, csv or json.")
        var format: Format = .table

        func validate() throws {
            _ = try groupings()
        }

        func groupings() throws -> Set<AuditGrouping> {
            do {
                return try groupBy.map { text throws(AuditQueryError) in try AuditGrouping.parse(list: text, field: "--group-by") } ?? []
            } catch {
                throw ValidationError(error.flagMessage)
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let auditFilter = try filter.auditFilter()
            let (app, groupings) = (filter.app, AuditGrouping.effective(try groupings(), for: auditFilter))
            let rows: [AuditSummaryRow]
            do {
                rows = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                    try await Audit.requireKnownApp(app, client: client, logger: logger)
                    return try await AuditQueries(client: client, logger: logger).summary(app: app, filter: auditFilter, groupBy: groupings)
                }
            } catch let error as AuditQueryError {
                throw CommandFailure(message: error.message)
            }
            switch format {
            case .json:
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                Output.line(String(decoding: try encoder.encode(["rows": rows]), as: UTF8.self))
            case .csv:
                Output.write(Data((AuditCSV.summaryHeader + rows.map(AuditCSV.line).joined()).utf8))
            case .table:
                var columns: [(String, (AuditSummaryRow) -> String)] = []
                if groupings.contains(.day) { columns.append(("day", { $0.day ?? "" })) }
                if groupings.contains(.product) { columns.append(("product", { $0.productId ?? "" })) }
                columns.append(("currency", { $0.currency ?? "(unpriced)" }))
                if groupings.contains(.environment) { columns.append(("environment", { $0.environment?.rawValue ?? "" })) }
                if groupings.contains(.storefront) { columns.append(("storefront", { $0.storefront ?? "(unknown)" })) }
                columns += [
                    ("purchases", { String($0.purchases) }), ("units", { String($0.units) }), ("gross", { $0.gross }),
                    ("refunds", { String($0.refunds) }), ("refunded units", { String($0.refundedUnits) }),
                    ("refunded", { $0.refundedAmount }), ("net", { $0.net }), ("unpriced", { String($0.unpriced) }),
                    ("net proceeds", { row in row.netProceeds.map { "\($0) \(row.proceedsCurrency ?? "")" } ?? "unknown" }),
                    ("proceeds source", { $0.proceedsSource.rawValue }), ("proceeds unknown", { String($0.proceedsUnknown) }),
                ]
                Table.print(header: columns.map(\.0), rows: rows.map { row in columns.map { $0.1(row) } })
                if rows.isEmpty {
                    Output.line("no audit trail rows match")
                    if auditFilter.environment == .production {
                        Output.error("only production rows are totalled unless asked: --environment sandbox or --environment all shows the others")
                    }
                }
            }
        }
    }

    struct Unclassified: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Products the app sold that its catalog does not define yet.",
            discussion: "Their rows say product_type unknown; once the product is defined they are classified and drop off."
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.")
        var app: String

        @Flag(help: "JSON instead of a table.")
        var json = false

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let app = app
            let products: [UnclassifiedProduct]
            do {
                products = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                    try await Audit.requireKnownApp(app, client: client, logger: logger)
                    return try await AuditQueries(client: client, logger: logger).unclassified(app: app)
                }
            } catch let error as AuditQueryError {
                throw CommandFailure(message: error.message)
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                Output.line(String(decoding: try encoder.encode(["products": products]), as: UTF8.self))
                return
            }
            guard !products.isEmpty else {
                Output.line("every product \(app) sold is in its catalog")
                return
            }
            Table.print(
                header: ["product", "transactions", "units", "users", "first purchase", "last purchase"],
                rows: products.map {
                    [$0.productId, String($0.transactions), String($0.units), String($0.users),
                     LedgerJSON.formatTimestamp($0.firstPurchase), LedgerJSON.formatTimestamp($0.lastPurchase)]
                }
            )
        }
    }
}

/// A plain text table: columns padded to their widest value, numbers as given.
enum Table {
    static func print(header: [String], rows: [[String]]) {
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ values: [String]) -> String {
            zip(values, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }
        Output.line(line(header))
        for row in rows { Output.line(line(row)) }
    }
}
