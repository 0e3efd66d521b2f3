import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LocalPostgres

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer from a user's stream itself, now or at any past point (JSON).",
        discussion: """
            The answer is folded from the user's events, not read from the projections, so it can be asked \
            for any past moment: --as-of TIME counts the events recorded by then and judges activity at \
            that time; --at-position N counts the events up to log position N and judges activity now \
            (or at --at TIME). Times are ISO 8601, e.g. 2026-01-31T12:00:00Z.
            """,
        subcommands: [Entitlements.self, Balances.self, Subscriptions.self]
    )

    /// Options every query shares.
    struct Target: ParsableArguments {
        @Option(help: "The app's bundle id.")
        var app: String

        @Option(help: "The user id.")
        var user: String

        @Option(help: "Only events recorded by this time; activity judged at it.")
        var asOf: String?

        @Option(help: "Only events up to this log position.")
        var atPosition: Int64?

        @Option(help: "When to judge activity (default: --as-of, else now).")
        var at: String?

        func validate() throws {
            guard asOf == nil || atPosition == nil else {
                throw ValidationError("give --as-of or --at-position, not both")
            }
            for (flag, value) in [("--as-of", asOf), ("--at", at)] {
                if let value, LedgerJSON.parseTimestamp(value) == nil {
                    throw ValidationError("\(flag) '\(value)' is not an ISO 8601 time such as 2026-01-31T12:00:00Z")
                }
            }
            if let atPosition, atPosition < 0 { throw ValidationError("--at-position must be 0 or more") }
        }

        /// The user's state and catalog at the chosen point, and the instant to judge activity at.
        func load(_ options: GlobalOptions) async throws -> (UserLedger, ProductCatalog, Date) {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let asOf = asOf.flatMap(LedgerJSON.parseTimestamp)
            let instant = at.flatMap(LedgerJSON.parseTimestamp) ?? asOf ?? Date()
            let (app, user, atPosition) = (app, user, atPosition)
            let (state, catalog, registered) = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                let reader = UserStreamReader(store: PostgresEventStore(client: client, logger: logger))
                let (state, catalog): (UserLedger, ProductCatalog)
                if let asOf {
                    (state, catalog) = try await reader.asOf(app: app, user: user, recordedBy: asOf)
                } else {
                    let position = atPosition ?? .max
                    catalog = try await reader.catalog(app: app, upToPosition: position)
                    state = try await reader.state(of: StreamID.user(app: app, user: user), upToPosition: position, catalog: catalog)
                }
                // For an empty answer only: whether --app is the mistake.
                let registered = state.version > 0 ? [] : try await AppRegistry(client: client, logger: logger).apps().map(\.bundleId)
                return (state, catalog, registered)
            }
            guard state.version > 0 else {
                let when = asOf.map { " by \(LedgerJSON.formatTimestamp($0))" } ?? atPosition.map { " up to position \($0)" } ?? ""
                guard registered.contains(app) else {
                    let known = registered.isEmpty ? "no app is registered" : "registered: \(registered.joined(separator: ", "))"
                    throw CommandFailure(message: "user '\(user)' has no events in app '\(app)'\(when), and no app '\(app)' is registered (\(known); see `ledger apps list`): check --app")
                }
                throw CommandFailure(message: "user '\(user)' has no events in app '\(app)'\(when): check --user")
            }
            return (state, catalog, instant)
        }
    }

    static func print<Value: Encodable>(_ value: Value) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(LedgerJSON.formatTimestamp(date))
        }
        Output.line(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    struct Entitlements: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "What the user may use: products owned, subscriptions and whether active, consumables left.",
            discussion: """
                The same JSON as GET /v1/apps/{bundleId}/users/{userId}/entitlements, folded from the user's \
                stream instead of the projections: position is that of the user's last event counted.
                """
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var target: Target

        func run() async throws {
            let (state, catalog, instant) = try await target.load(options)
            try Query.print(EntitlementsBody(userId: target.user, position: state.lastPosition,
                                             state.entitlements(catalog: catalog, at: instant)))
        }
    }

    struct Balances: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Consumable balances: purchased, consumed, balance.")
        @OptionGroup var options: GlobalOptions
        @OptionGroup var target: Target

        func run() async throws {
            let (state, _, _) = try await target.load(options)
            struct Balance: Encodable { let productId: String; let purchased, consumed, balance: Int }
            try Query.print(state.consumableBalances.map {
                Balance(productId: $0.productId, purchased: $0.purchased, consumed: $0.consumed, balance: $0.balance)
            })
        }
    }

    struct Subscriptions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every paid subscription period, per product and group.")
        @OptionGroup var options: GlobalOptions
        @OptionGroup var target: Target

        func run() async throws {
            let (state, catalog, instant) = try await target.load(options)
            struct Period: Encodable { let kind, productId, group, transactionId: String; let start, end: Date; let active: Bool }
            let periods = state.subscriptionPeriods(catalog: catalog).map { period in
                Period(kind: period.kind.rawValue, productId: period.productId, group: period.group, transactionId: period.transactionId,
                       start: period.start, end: period.end, active: period.isActive(at: instant))
            }
            try Query.print(periods)
        }
    }
}
