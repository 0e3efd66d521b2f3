import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerProjections
import LedgerStore
import LocalPostgres
import Logging
import PostgresNIO

extension Audit {
    /// The filters export and summary share.
    struct Filter: ParsableArguments {
        @Option(help: "The app's bundle id.")
        var app: String

        @Option(help: ArgumentHelp("Rows that occurred at or after this time (ISO 8601, e.g. 2026-01-01T00:00:00Z).", valueName: "time"))
        var from: String?

        @Option(help: ArgumentHelp("Rows that occurred before this time: the period is [from, to).", valueName: "time"))
        var to: String?

        @Option(help: ArgumentHelp("Event types, comma-separated: purchase, renewal, refund (default: all).", valueName: "types"))
        var type: String?

        @Option(help: ArgumentHelp("Only this product id.", valueName: "product-id"))
        var product: String?

        @Option(help: ArgumentHelp("Only this user id.", valueName: "user-id"))
        var user: String?

        @Option(help: "production (the default), sandbox, or all (totals then kept apart per environment).")
        var environment: String?

        func validate() throws {
            _ = try auditFilter()
        }

        /// The filter the flags describe; a bad flag is a usage error naming it.
        func auditFilter() throws -> AuditFilter {
            do {
                let filter = AuditFilter(
                    from: try from.map { text throws(AuditQueryError) in try AuditFilter.time(text, field: "--from") },
                    to: try to.map { text throws(AuditQueryError) in try AuditFilter.time(text, field: "--to") },
                    events: try type.map { text throws(AuditQueryError) in try AuditEventKind.parse(list: text, field: "--type") } ?? [],
                    productId: product, userId: user,
                    environment: try environment.map { text throws(AuditQueryError) in try AuditFilter.environment(named: text, field: "--environment") }
                        ?? .production
                )
                try filter.validate()
                return filter
            } catch {
                throw ValidationError(error.flagMessage)
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the audit trail's rows to standard output, as CSV or JSON Lines.",
            discussion: """
                Rows come in log order (position, then event) and are read a page at a time, so any length \
                of trail streams in constant memory.

                csv: RFC 4180, a header line, CRLF line ends, values exactly as recorded, empty for NULL.
                json: JSON Lines, one object per line, every key present (null when absent).

                Times are ISO 8601 UTC; money is decimal text, amount = price × quantity. Progress (rows, \
                rows/s) goes to standard error: one line updated in place on a terminal, else a line every \
                100,000 rows and one at the end.
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case csv, json
        }

        @OptionGroup var options: GlobalOptions
        @OptionGroup var filter: Filter

        @Option(help: "csv or json (JSON Lines).")
        var format: Format = .csv

        @Option(help: ArgumentHelp("Rows read per database query.", valueName: "rows"))
        var pageSize: Int = 1_000

        func validate() throws {
            guard (1...AuditQueries.maximumPageSize).contains(pageSize) else {
                throw ValidationError("--page-size must be 1 to \(AuditQueries.maximumPageSize)")
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let auditFilter = try filter.auditFilter()
            let (app, format, pageSize) = (filter.app, format, pageSize)
            do {
                try await LedgerDatabase.withClient(settings, logger: logger) { client in
                    try await Audit.requireKnownApp(app, client: client, logger: logger)
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                    var output = BufferedOutput()
                    var progress = ExportProgress(terminal: Output.errorIsTerminal)
                    if format == .csv { output.write(AuditCSV.header) }
                    // After a failure part way, what was read still goes out (the exit status says it is incomplete).
                    defer { if progress.rows > 0 { output.flush() } }
                    try await AuditQueries(client: client, logger: logger).forEachEvent(app: app, filter: auditFilter, pageSize: pageSize) { row in
                        switch format {
                        case .csv: output.write(AuditCSV.line(row))
                        case .json: output.write(String(decoding: try encoder.encode(row), as: UTF8.self) + "\n")
                        }
                        progress.rowWritten()
                    }
                    output.flush()
                    progress.finish()
                }
            } catch let error as AuditQueryError {
                throw CommandFailure(message: error.message)
            }
        }
    }
}

extension Audit {
    /// Refuses an app that is neither registered nor in the audit trail: most likely a typo in
    /// --app, which would otherwise give an empty report that looks like a quiet period.
    static func requireKnownApp(_ app: String, client: DatabasePool, logger: Logger) async throws {
        let registered = try await AppRegistry(client: client, logger: logger).apps().map(\.bundleId)
        guard !registered.contains(app), !(try await AuditQueries(client: client, logger: logger).hasRows(app: app)) else { return }
        let known = registered.isEmpty ? "no app is registered" : "registered: \(registered.joined(separator: ", "))"
        throw CommandFailure(message: "--app: no app '\(app)' is registered and the audit trail has no rows for it (\(known); see `ledger apps list`)")
    }
}

extension AuditQueryError {
    /// The message, led by the flag at fault when it does not name it already.
    var flagMessage: String {
        guard let field, !message.contains(field) else { return message }
        return "\(field.hasPrefix("--") ? field : "--" + field): \(message)"
    }
}

/// Standard output in 64 KiB writes rather than one per row.
struct BufferedOutput {
    private var buffer = Data()

    mutating func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        guard !buffer.isEmpty else { return }
        Output.write(buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Rows written and rows per second on standard error: a line rewritten in place on a terminal
/// (at most 5 times a second), otherwise a plain line every 100,000 rows and one at the end.
struct ExportProgress {
    let terminal: Bool
    private let started = ContinuousClock.now
    private var lastShown = ContinuousClock.now
    private(set) var rows = 0

    init(terminal: Bool) {
        self.terminal = terminal
    }

    mutating func rowWritten() {
        rows += 1
        if terminal {
            guard rows % 100 == 0, ContinuousClock.now - lastShown >= .milliseconds(200) else { return }
            lastShown = .now
            Output.progress("\r" + text())
        } else if rows % 100_000 == 0 {
            Output.error(text())
        }
    }

    func finish() {
        if terminal {
            Output.progress("\r" + text() + "\n")
        } else {
            Output.error(text())
        }
    }

    private func text() -> String {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(rows) / seconds : 0
        return "exported \(rows) rows (\(Int(rate.rounded())) rows/s)"
    }
}
