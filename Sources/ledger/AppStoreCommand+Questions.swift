import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

/// What the `ledger appstore` commands that ask Apple share: where the App Store Server API is,
/// which roots are trusted, and the ledger over the database.
struct AppStoreAccess: ParsableArguments {
    @Option(help: ArgumentHelp("Also trust this PEM root for Apple's signed payloads (the simulator's).", valueName: "file"))
    var trustSimulatorRoot: String?

    /// Runs `body` with the ledger over the runtime role's connection and the App Store Server
    /// API of $LEDGER_APPSTORE_SERVER_API_*_URL (default: Apple's).
    func withLedger<Result: Sendable>(
        _ options: GlobalOptions, _ body: @escaping @Sendable (PostgresLedger) async throws -> Result
    ) async throws -> Result {
        let logger = try options.makeLogger()
        let variables = ProcessInfo.processInfo.environment
        let verifier = try ServeOptions.signedPayloadVerifier(trustSimulatorRoot ?? variables["LEDGER_TRUST_SIMULATOR_ROOT"], logger: logger)
        let secrets = try options.secretSealer()
        let roles = try await options.databaseRoles(logger: logger)
        try await roles.prepareSchema(logger: logger)
        let api = AppStoreServerAPI(configuration: .fromEnvironment(variables), verifier: verifier)
        do {
            return try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                try await body(PostgresLedger(client: client, secrets: secrets, history: api, logger: logger))
            }
        } catch let error as AppStoreQueryError {
            throw CommandFailure(message: error.message)
        } catch let error as BackfillError {
            throw CommandFailure(message: error.message)
        } catch let error as TransactionHistoryError {
            throw CommandFailure(message: error.description)
        } catch let error as AccessError {
            throw CommandFailure(message: error.message)
        } catch let error as ReadError {
            throw CommandFailure(message: error.message)
        }
    }

    static func environment(_ name: String?) throws -> StoreEnvironment? {
        guard let name else { return nil }
        guard let parsed = StoreEnvironment(rawValue: name) else { throw CommandFailure(message: "--environment is production or sandbox, not '\(name)'") }
        return parsed
    }

    static func time(_ date: Date?) -> String { date.map { $0.formatted(.iso8601) } ?? "—" }
}

extension AppStoreCommand {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recover App Store notifications the webhook never recorded, from Apple's notification history.",
            discussion: """
                Walks the app's notification history (App Store Server API, Get Notification History; Apple keeps 180 \
                days in production, 30 in the sandbox) and records every notification the log lacks through the \
                webhook's own intake: the same fact, the same routing to the user who holds its transaction. A \
                notification the log holds already is left as it is, so running it twice records nothing the second \
                time. Without --since, from a little before the last whole walk (the server that leads the projections \
                walks every 10 minutes), or 7 days back on a first walk. Prints what it saw and recovered, by type.
                """
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var access: AppStoreAccess

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "Walk from this time: ISO 8601 (2026-11-01 or 2026-11-01T12:00:00Z), or a span back from now (36h, 14d).")
        var since: String?
        @Option(help: "production or sandbox (default: both).") var environment: String?

        func run() async throws {
            let start = try since.map { try Self.instant($0, now: Date()) }
            let environments = try AppStoreAccess.environment(environment).map { [$0] } ?? [.production, .sandbox]
            let app = app
            let reports = try await access.withLedger(options) { ledger -> [SyncNotifications.Report] in
                guard let sync = ledger.syncNotifications else { throw CommandFailure(message: "this ledger has no App Store Server API client") }
                var reports: [SyncNotifications.Report] = []
                for environment in environments {
                    do {
                        reports.append(try await sync(app: app, environment: environment, since: start))
                    } catch let error as TransactionHistoryError {
                        throw CommandFailure(message: "\(app) \(environment.rawValue): \(error.description); what was recorded stays, and the synced-through time did not move: run it again")
                    }
                }
                return reports
            }
            for report in reports {
                Output.line("\(report.app) \(report.environment.rawValue): Apple's history from \(AppStoreAccess.time(report.from)) to \(AppStoreAccess.time(report.to)) lists \(report.seen) notification(s); \(report.recovered) recovered")
                for (kind, count) in report.kinds.sorted(by: { $0.key < $1.key }) { Output.line("  \(kind): \(count)") }
                for refusal in report.refused { Output.line("  not recorded (did not verify): \(refusal)") }
            }
        }

        /// An ISO 8601 date or date-time, or a span back from `now` (`36h`, `14d`, `90m`).
        static func instant(_ text: String, now: Date) throws -> Date {
            if let unit = text.last, let amount = Double(text.dropLast()), amount >= 0, let seconds = ["m": 60.0, "h": 3_600.0, "d": 86_400.0][unit] {
                return now - amount * seconds
            }
            if let date = try? Date(text, strategy: .iso8601) { return date }
            if let day = try? Date(text, strategy: Date.ISO8601FormatStyle().year().month().day()) { return day }
            throw CommandFailure(message: "--since is an ISO 8601 time (2026-11-01, 2026-11-01T12:00:00Z) or a span back from now (36h, 14d), not '\(text)'")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A user's subscriptions as Apple has them now, beside what the ledger says; records what is news.",
            discussion: """
                Asks the App Store Server API (Get All Subscription Statuses) about the user's auto-renewable \
                subscriptions, once per Apple account they were bought with, in each environment the user has \
                purchases in; records the latest signed transactions and renewal info the stream lacks (as a backfill \
                does), then prints, per subscription group, Apple's state beside the ledger's. Exits 1 when they differ.
                """
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var access: AppStoreAccess

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "The ledger's user.") var user: String

        func run() async throws {
            let (app, user) = (app, user)
            let statuses = try await access.withLedger(options) { ledger in
                try await ledger.appStoreQueries.subscriptionStatuses(app: app, user: user)
            }
            guard !statuses.subscriptions.isEmpty else {
                Output.line("\(app), \(user): Apple lists no auto-renewable subscription for the accounts of this user's purchases")
                return
            }
            func describe(_ view: AppStoreQueries.Subscription.View) -> String {
                [view.state, view.productId ?? "no product", "expires \(AppStoreAccess.time(view.expiresDate))",
                 view.autoRenew.map { $0 ? "renews" : "does not renew" } ?? "renewal unknown"].joined(separator: ", ")
            }
            var differ = 0
            for subscription in statuses.subscriptions {
                Output.line("\(subscription.environment.rawValue)  group \(subscription.group)  original transaction \(subscription.originalTransactionId)")
                Output.line("  Apple:  \(describe(subscription.apple))")
                Output.line("  ledger: \(subscription.ledger.map(describe) ?? "holds none of it")\(subscription.agrees ? "" : "   ← differs")")
                if !subscription.agrees { differ += 1 }
            }
            Output.line("recorded \(statuses.recorded) new fact(s) from Apple's answer")
            if !statuses.heldByOthers.isEmpty {
                Output.line("held by another user of the app, not recorded: \(statuses.heldByOthers.joined(separator: ", "))")
            }
            if differ > 0 {
                throw CommandFailure(message: "\(differ) subscription(s) differ between Apple and the ledger after recording Apple's answer: `ledger appstore backfill --app \(app) --user \(user) --transaction ORIGINAL` records the whole history")
            }
        }
    }

    struct Order: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Look up an order from a customer's e-mail receipt, with the user the ledger holds it for.",
            discussion: """
                Asks Apple's order lookup (App Store Server API, production) for the Order ID printed on the \
                customer's e-mail receipt, verifies the signed transactions, and prints each with the ledger's user who \
                holds it, or that no user holds it. Records nothing.
                """
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var access: AppStoreAccess

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "The Order ID on the customer's e-mail receipt.") var orderId: String

        func run() async throws {
            let (app, orderId) = (app, orderId)
            let order = try await access.withLedger(options) { ledger in try await ledger.appStoreQueries.order(app: app, orderId: orderId) }
            Output.line("order \(order.orderId): \(order.transactions.count) transaction(s)")
            for item in order.transactions {
                let money = item.price.map { "\($0) \(item.currency ?? "")" } ?? "unpriced"
                Output.line("  \(item.transactionId)  \(item.productId ?? "?")  ×\(item.quantity)  \(money)  purchased \(AppStoreAccess.time(item.purchaseDate))"
                    + (item.revocationDate.map { "  refunded \(AppStoreAccess.time($0))" } ?? ""))
                if let user = item.userId {
                    Output.line("    held by user \(user)")
                } else {
                    Output.line("    held by no user of the ledger: `ledger appstore backfill --app \(app) --user USER --transaction \(item.originalTransactionId ?? item.transactionId)` records it for one")
                }
            }
        }
    }

    struct TestNotification: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test-notification",
            abstract: "Ask Apple to send a TEST notification, and report whether it arrived and was recorded.",
            discussion: """
                Asks the App Store Server API (Request a Test Notification) to send a TEST notification to the URL set \
                in App Store Connect for the environment, waits up to --wait seconds for Apple's first try (Get Test \
                Notification Status), and looks for the notification in the log. Exits 1 unless it was recorded.
                """
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var access: AppStoreAccess

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "production or sandbox.") var environment: String = "production"
        @Option(help: "Seconds to wait for Apple's try.") var wait: Int = 30

        func run() async throws {
            guard (1...600).contains(wait) else { throw CommandFailure(message: "--wait is 1 to 600 seconds") }
            let app = app
            let environment = try AppStoreAccess.environment(environment) ?? .production
            let wait = Duration.seconds(wait)
            let result = try await access.withLedger(options) { ledger in
                try await ledger.appStoreQueries.testNotification(app: app, environment: environment, wait: wait)
            }
            Output.line("\(app) \(environment.rawValue): test notification \(result.notificationUUID ?? "(not sent yet)")")
            for attempt in result.attempts { Output.line("  Apple tried at \(AppStoreAccess.time(attempt.date)): \(attempt.result)") }
            guard result.recorded != nil else { throw CommandFailure(message: result.verdict) }
            Output.line(result.verdict)
        }
    }
}
