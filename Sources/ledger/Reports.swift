import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

struct Reports: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apple's sales reports: import them, and reconcile the ledger with them.",
        discussion: """
            Apple's Summary Sales Report (App Store Connect > Sales and Trends > Reports, daily, or the App \
            Store Connect API) counts, per reporting day, the units and money of each product by country, \
            customer currency and price. Imported, each file is kept as received and its in-app purchase lines \
            become a fact in the log; `reconcile` puts them beside the ledger's audit trail and explains every \
            difference it can.
            """,
        subcommands: [Import.self, Fetch.self, ConnectKey.self, Reconcile.self, TimeZoneSetting.self, TaxRate.self, SmallBusiness.self]
    )

    /// Runs `body` with the ledger over the runtime role's connection.
    static func withLedger<Result: Sendable>(
        _ options: GlobalOptions, _ body: @escaping @Sendable (PostgresLedger) async throws -> Result
    ) async throws -> Result {
        let logger = try options.makeLogger()
        let secrets = try options.secretSealer()
        let roles = try await options.databaseRoles(logger: logger)
        try await roles.prepareSchema(logger: logger)
        do {
            return try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                try await body(PostgresLedger(client: client, secrets: secrets, logger: logger))
            }
        } catch let error as SalesReportFetchError {
            throw CommandFailure(message: error.message)
        } catch let error as SecretError {
            throw CommandFailure(message: error.message)
        } catch let error as AccessError {
            throw CommandFailure(message: error.message)
        } catch let error as AuditQueryError {
            throw CommandFailure(message: error.message)
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import Apple's daily Summary Sales Report files for an app.",
            discussion: """
                Each FILE is a Summary Sales Report as App Store Connect gives it: tab-separated text, plain or \
                gzip (S_D_<vendor>_<yyyymmdd>.txt.gz), any of Apple's report versions (columns are found by \
                name). One file is one reporting day. Its in-app purchase lines are recorded as one fact \
                (SalesReportReceived) and the file is kept byte for byte; app downloads and updates are counted, \
                not recorded. The same file again records nothing; another file of a day already imported is \
                Apple's correction and supersedes it (both stay in the log). A malformed file is refused with the \
                line and column at fault, and nothing of it is recorded; the other files are still imported. \
                Exit status 1 when any file was refused.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("The reporting day (yyyy-MM-dd) of a file with no lines, when its name does not say it.", valueName: "date"))
        var date: String?
        @Argument(help: ArgumentHelp("Report files (.txt or .txt.gz).", valueName: "file")) var files: [String]

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("name at least one report file") }
        }

        func run() async throws {
            var parsed: [(name: String, report: ReceivedSalesReport)] = []
            var refused = 0
            for path in files {
                let name = URL(fileURLWithPath: path).lastPathComponent
                do {
                    let content = try Data(contentsOf: URL(fileURLWithPath: path))
                    let hint = FileName(name)
                    let file = try SalesReportParser.parse(content, reportDate: date ?? hint.date)
                    parsed.append((name, ReceivedSalesReport(
                        content: content, reportDate: file.reportDate, columns: file.columns, lines: file.lines, otherLines: file.otherLines,
                        source: "file:\(name)", vendorNumber: hint.vendor
                    )))
                } catch let error as SalesReportError {
                    refused += 1
                    Output.error("\(name): \(error.message); nothing of it was recorded")
                } catch {
                    refused += 1
                    Output.error("\(path): cannot be read (\(error.localizedDescription))")
                }
            }
            let app = app
            let reports = parsed
            let outcomes = try await Reports.withLedger(options) { ledger in
                var outcomes: [ImportSalesReports.Outcome] = []
                for (_, report) in reports { outcomes.append(try await ledger.importSalesReports.record(report, app: app)) }
                return outcomes
            }
            for ((name, report), outcome) in zip(parsed, outcomes) {
                let lines = "\(report.lines.count) in-app purchase line(s)" + (report.otherLines > 0 ? ", \(report.otherLines) other" : "")
                switch outcome.kind {
                case .recorded:
                    print("\(name): \(outcome.reportDate), \(lines): recorded at position \(outcome.position)")
                case .superseding:
                    print("\(name): \(outcome.reportDate), \(lines): a corrected report, recorded at position \(outcome.position); it supersedes \(outcome.supersedes?.prefix(12) ?? "")…, which stays in the log")
                case .duplicate:
                    print("\(name): \(outcome.reportDate): this file was imported before (position \(outcome.position)); nothing new")
                }
            }
            if refused > 0 { throw ExitCode(1) }
        }

        /// What Apple's file names say: `S_D_<vendor>_<yyyymmdd>…`.
        struct FileName {
            let vendor: String?
            let date: String?

            init(_ name: String) {
                let parts = name.split(separator: ".").first?.split(separator: "_") ?? []
                guard parts.count >= 4, parts[0] == "S", parts[1] == "D", parts[3].count == 8, parts[3].allSatisfy(\.isNumber) else {
                    vendor = nil
                    date = nil
                    return
                }
                let digits = Array(parts[3])
                vendor = String(parts[2])
                date = "\(String(digits[0..<4]))-\(String(digits[4..<6]))-\(String(digits[6..<8]))"
            }
        }
    }

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The ledger's sales beside Apple's reports, day by day, with every difference explained.",
            discussion: """
                Per Apple reporting day, product, country, customer currency and customer price: the units sold and \
                refunded and their money as Apple's latest report of the day counts them, beside the ledger's \
                production audit rows of the same day in the reporting time zone. A row that differs says why where \
                the ledger can (a sale Apple reports the ledger never saw, one the ledger holds that Apple does not, \
                a neighbouring day, another price, a refund on another day, verifyReceipt rows that name no country) \
                and lists the ledger's transactions behind it. Sandbox rows are never in Apple's reports and are only \
                counted. Exit status 0 when nothing differs, 2 when something does.
                """
        )

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case table, csv, json
        }

        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("First reporting day (yyyy-MM-dd).", valueName: "date")) var from: String
        @Option(help: ArgumentHelp("Last reporting day (yyyy-MM-dd), included.", valueName: "date")) var to: String
        @Option(help: ArgumentHelp("The reports' time zone (default: the app's, set with `ledger reports time-zone`, else Pacific Time).",
                                   valueName: "IANA name"))
        var timeZone: String?
        @Option(help: "table, csv or json.") var format: Format = .table
        @Flag(help: "List matched rows too (table format).") var all = false

        func run() async throws {
            let (app, from, to, timeZone) = (app, from, to, timeZone)
            let reconciliation = try await Reports.withLedger(options) { ledger in
                try await ledger.reconcileSalesReports.reconcile(app: app, from: from, to: to, timeZone: timeZone)
            }
            switch format {
            case .csv: print(ReconciliationCSV.document(reconciliation), terminator: "")
            case .json:
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(reconciliation), as: UTF8.self))
            case .table: printTable(reconciliation)
            }
            if reconciliation.rows.contains(where: { $0.status == .differs }) { throw ExitCode(2) }
        }

        private func printTable(_ reconciliation: Reconciliation) {
            print("\(reconciliation.app): \(reconciliation.from) to \(reconciliation.to), reporting days in \(reconciliation.timeZone)")
            for day in reconciliation.days {
                let report = day.report.map { "report \($0.prefix(12))…" } ?? "no report imported"
                print("  \(day.day)  \(report)  \(day.rows) row(s)\(day.differing > 0 ? ", \(day.differing) differ" : "")")
            }
            if reconciliation.sandboxUnits > 0 {
                print("  sandbox: \(reconciliation.sandboxUnits) unit(s) in the ledger, never in Apple's reports (not compared)")
            }
            let shown = reconciliation.rows.filter { all || $0.status != .matched }
            let matched = reconciliation.rows.count(where: { $0.status == .matched })
            print("\(matched) of \(reconciliation.rows.count) row(s) match\(shown.isEmpty ? "" : ":")")
            for row in shown {
                let grain = [row.day, row.productId, row.country ?? "(no country)", row.currency ?? "(no currency)", row.price ?? "(unpriced)"]
                print("\n  \(grain.joined(separator: "  "))  \(row.status.rawValue)")
                print("    sold      Apple \(row.apple.unitsSold) (\(row.apple.amountSold))  ledger \(row.ledger.unitsSold) (\(row.ledger.amountSold))")
                if row.apple.unitsRefunded + row.ledger.unitsRefunded > 0 {
                    print("    refunded  Apple \(row.apple.unitsRefunded) (\(row.apple.amountRefunded))  ledger \(row.ledger.unitsRefunded) (\(row.ledger.amountRefunded))")
                }
                if let proceeds = row.appleProceeds { print("    Apple's proceeds \(proceeds) \(row.proceedsCurrency ?? "")") }
                if let source = row.proceedsSource {
                    print("    ledger's proceeds \(row.ledgerProceeds.map { "\($0) \(row.ledgerProceedsCurrency ?? "")" } ?? "unknown") (\(source.rawValue))")
                }
                for explanation in row.explanations { print("    \(explanation.code.rawValue): \(explanation.message)") }
                if !row.transactions.isEmpty { print("    transactions: \(row.transactions.joined(separator: " "))") }
            }
        }
    }

    struct TaxRate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tax-rate",
            abstract: "Show or set the share of a country's customer prices that is tax, for estimated proceeds.",
            discussion: """
                Where no imported report of Apple's covers a sale, its proceeds are estimated: the customer price net of \
                tax, less Apple's commission (30 %; 15 % in the Small Business Program or for a subscription's renewals \
                after a year). The tax is this share of the price in the buyer's country, from --from on: 0.1667 where \
                prices include 20 % VAT (0.20 / 1.20), 0 where prices do not include tax (the United States, Canada). \
                A country without a rate has unknown proceeds, never a guess. With no arguments, lists the rates.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Argument(help: "ISO 3166-1 alpha-2 country code (FR, JP, US).") var country: String?
        @Argument(help: "The tax share of a price, from 0 to below 1.") var share: String?
        @Option(help: ArgumentHelp("First day it applies (yyyy-MM-dd).", valueName: "date")) var from = "2000-01-01"

        func validate() throws {
            guard (country == nil) == (share == nil) else { throw ValidationError("give a country and its share, or neither to list the rates") }
        }

        func run() async throws {
            let (country, share, from) = (country, share, from)
            let rules = try await Reports.withLedger(options) { ledger in
                if let country, let share { try await ledger.salesReports.setTaxRate(country: country.uppercased(), validFrom: from, share: share) }
                return try await ledger.salesReports.rules(app: "")
            }
            if let country { print("\(country.uppercased()): tax is \(share ?? "") of the price from \(from) on") }
            else if rules.taxRates.isEmpty { print("no tax rates: every estimate is unknown until one is set (`ledger reports tax-rate FR 0.1667`)") }
            else {
                print("country\tfrom\tshare")
                for rate in rules.taxRates { print("\(rate.country)\t\(rate.validFrom)\t\(rate.share)") }
            }
        }
    }

    struct SmallBusiness: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "small-business",
            abstract: "Record a period an app was in the App Store Small Business Program (15 % commission), for estimated proceeds.",
            discussion: "Days from --from up to --to (excluded; open-ended without it), as the program's enrollment says. With --from alone on an existing period, ends nothing: give --to to end it."
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("First day in the program (yyyy-MM-dd).", valueName: "date")) var from: String
        @Option(help: ArgumentHelp("First day out of it (yyyy-MM-dd).", valueName: "date")) var to: String?

        func run() async throws {
            let (app, from, to) = (app, from, to)
            let rules = try await Reports.withLedger(options) { ledger in
                try await ledger.salesReports.setSmallBusiness(app: app, from: from, to: to)
                return try await ledger.salesReports.rules(app: app)
            }
            print("\(app): in the Small Business Program")
            for period in rules.smallBusiness { print("  from \(period.validFrom)\(period.validTo.map { " to \($0)" } ?? " on")") }
        }
    }

    struct ConnectKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "connect-key",
            abstract: "Give an app its App Store Connect API key and vendor number, for `ledger reports fetch`.",
            discussion: """
                A team key from App Store Connect (Users and Access > Integrations > App Store Connect API) with the \
                Sales or Finance role: its key id, the issuer id, and the private key file (AuthKey_<key id>.p8, PEM); \
                and the vendor number (Payments and Financial Reports, top left). This is not the In-App Purchase key \
                of `ledger apps appstore-key`. The private key is stored sealed (AES-256-GCM) with the key of \
                LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE; it is never logged, printed or returned. Running this \
                again replaces the key.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "The key's id in App Store Connect.") var keyId: String
        @Option(help: "The issuer id of the team's keys.") var issuerId: String
        @Option(help: ArgumentHelp("The private key file (.p8, PEM).", valueName: "file")) var privateKey: String
        @Option(help: "The vendor number the app's reports are filed under.") var vendorNumber: String

        func run() async throws {
            let pem: String
            do {
                pem = try String(contentsOfFile: privateKey, encoding: .utf8)
            } catch {
                throw CommandFailure(message: "cannot read the private key file '\(privateKey)': \(error.localizedDescription)")
            }
            let key = AppStoreConnectKey(keyID: keyId, issuerID: issuerId, privateKeyPEM: pem, vendorNumber: vendorNumber)
            do {
                _ = try AppStoreConnectReports(key: key).token(now: Date())
            } catch let error as SalesReportFetchError {
                throw CommandFailure(message: "\(privateKey): \(error.message)")
            }
            let app = app
            try await Reports.withLedger(options) { ledger in try await ledger.registry.setAppStoreConnectKey(key, of: app) }
            Output.line("\(app): App Store Connect key \(keyId) (issuer \(issuerId), vendor \(vendorNumber)) stored, its private key sealed")
        }
    }

    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download Apple's daily Summary Sales Reports from App Store Connect and record them.",
            discussion: """
                One call per reporting day, each with one deadline; a 429 is waited out once (Retry-After) and then \
                said. Each report is recorded as `ledger reports import` records a file: the same report again records \
                nothing, a corrected one supersedes. A day Apple says had no sales is recorded as a report with no \
                lines (the reconciliation then holds the ledger's sales of that day against nothing); a day not \
                published yet (reports come the next morning) is said and skipped. Needs `ledger reports connect-key`; \
                LEDGER_APPSTORE_CONNECT_URL points at the simulator instead of Apple. Exit status 1 when a day failed.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: ArgumentHelp("First reporting day (yyyy-MM-dd).", valueName: "date")) var from: String
        @Option(help: ArgumentHelp("Last reporting day (yyyy-MM-dd), included.", valueName: "date")) var to: String

        func run() async throws {
            let (app, from, to) = (app, from, to)
            let days = try await Reports.withLedger(options) { ledger -> [FetchSalesReports.Day] in
                guard let key = try await ledger.registry.appStoreConnectKey(of: app) else {
                    throw CommandFailure(message: "\(app) has no App Store Connect key: `ledger reports connect-key --app \(app) …`")
                }
                let source = AppStoreConnectReports(configuration: .fromEnvironment(), key: key)
                return try await FetchSalesReports(source: source, importer: ledger.importSalesReports).fetch(app: app, from: from, to: to) { day in
                    if let outcome = day.outcome {
                        let what = switch outcome.kind {
                        case .recorded: "recorded at position \(outcome.position)"
                        case .superseding: "a corrected report, recorded at position \(outcome.position)"
                        case .duplicate: "the same as recorded before (position \(outcome.position)); nothing new"
                        }
                        Output.line("\(day.day): \(outcome.lines) in-app purchase line(s): \(what)")
                    } else {
                        Output.line("\(day.day): \(day.failure ?? "not fetched")")
                    }
                }
            }
            if days.contains(where: { $0.outcome == nil }) { throw ExitCode(1) }
        }
    }

    struct TimeZoneSetting: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "time-zone",
            abstract: "Show or set the time zone of an app's Sales and Trends reports.",
            discussion: """
                Apple's daily reports are days of the time zone of the territories the app's agreement covers: Pacific \
                Time for worldwide agreements (the default), Europe/Paris for Europe, the Middle East and Africa, \
                Asia/Tokyo for Japan and Asia Pacific, Australia/Perth for Australia and New Zealand. Reconciliation reads \
                the ledger's sales by the days of this zone.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Argument(help: "An IANA time zone.") var zone: String?

        func run() async throws {
            let (app, zone) = (app, zone)
            let current = try await Reports.withLedger(options) { ledger in
                if let zone { try await ledger.salesReports.setReportingTimeZone(app: app, zone) }
                return try await ledger.reconcileSalesReports.reportingTimeZone(app: app)
            }
            print("\(app): reporting days in \(current)")
        }
    }
}

