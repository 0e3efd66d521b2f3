import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerStore

struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send every change of an app's users to its own servers: signed webhooks.",
        discussion: """
            Each endpoint gets every change (or those of --types) of its app as a JSON POST, signed as Standard Webhooks \
            does (headers webhook-id, webhook-timestamp, webhook-signature), in log order per user, at least once. A \
            failed delivery is tried again for more than a day, then parked; `ledger webhooks resend` sends it again. \
            The server that leads the projections delivers. See docs/webhooks.md.
            """,
        subcommands: [Add.self, List.self, Remove.self, Deliveries.self, Resend.self]
    )

    /// Runs `body` with the ledger's use cases, its errors said as a command's failure.
    static func withWebhooks<Result: Sendable>(
        _ options: GlobalOptions, _ body: @escaping @Sendable (ManageWebhooks) async throws -> Result
    ) async throws -> Result {
        do {
            return try await Reports.withLedger(options) { ledger in try await body(ledger.webhooks) }
        } catch let error as WebhookError {
            throw CommandFailure(message: error.message)
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an endpoint to an app; prints its id and its secret, once.",
            discussion: """
                The URL must be https://, except on this machine (http://127.0.0.1, http://[::1], http://localhost). \
                Redirects are never followed: register the final URL. The endpoint's secret (whsec_…) is printed once \
                and stored sealed with the key of LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE (with the managed \
                PostgreSQL, .ledger/secret.key); without a key, adding an endpoint is refused. The endpoint starts \
                with the changes written from now on, unless --from-position says otherwise (0: the whole history).
                """
        )
        @OptionGroup var options: GlobalOptions
        @Option(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id")) var app: String
        @Option(help: ArgumentHelp("Where to POST the changes: https://…", valueName: "url")) var url: String
        @Option(help: ArgumentHelp("Only these change types, comma-separated (default: all).", valueName: "type,…")) var types: String?
        @Option(help: ArgumentHelp("Send the changes after this log position too (0: all history).", valueName: "position"))
        var fromPosition: Int64?

        func run() async throws {
            let (app, url, from) = (app, url, fromPosition)
            let types = types.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            let created = try await Webhooks.withWebhooks(options) { webhooks in
                try await webhooks.add(app: app, url: url, types: types, fromPosition: from)
            }
            let endpoint = created.endpoint
            Output.line("added webhook endpoint \(endpoint.id) of \(endpoint.app): \(endpoint.url)")
            Output.line("  types: \(endpoint.types?.joined(separator: ",") ?? "all"); changes after position \(endpoint.position)")
            Output.line("  secret: \(created.secret.text)")
            Output.line("keep the secret now: it is stored sealed and will not be shown again (to change it, add a new endpoint and remove this one)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an app's endpoints (not their secrets).")
        @OptionGroup var options: GlobalOptions
        @Option(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id")) var app: String

        func run() async throws {
            let app = app
            let endpoints = try await Webhooks.withWebhooks(options) { try await $0.list(app: app) }
            guard !endpoints.isEmpty else { return Output.line("\(app) has no webhook endpoints; `ledger webhooks add --app \(app) --url URL` adds one") }
            Output.line("id\turl\ttypes\tqueued up to position\tcreated")
            for endpoint in endpoints {
                Output.line("\(endpoint.id)\t\(endpoint.url)\t\(endpoint.types?.joined(separator: ",") ?? "all")\t\(endpoint.position)\t\(endpoint.createdAt.formatted(.iso8601))")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an endpoint: nothing more is sent to it; its deliveries stay listed."
        )
        @OptionGroup var options: GlobalOptions
        @Argument(help: "The endpoint's id (wh_…).") var id: String

        func run() async throws {
            let id = id
            let removed = try await Webhooks.withWebhooks(options) { try await $0.remove(id: id) }
            Output.line("removed webhook endpoint \(removed.id) of \(removed.app) (\(removed.url))")
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show an app's latest deliveries, each with every attempt and its answer.",
            discussion: """
                One line per delivery (change id, endpoint, user, type, status, attempts), then one per attempt: when, \
                the HTTP status or the error, how long it took, and the start of the answer. --failed shows only those \
                parked or whose last attempt failed.
                """
        )
        @OptionGroup var options: GlobalOptions
        @Option(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id")) var app: String
        @Option(help: ArgumentHelp("Only this endpoint's.", valueName: "id")) var endpoint: String?
        @Flag(help: "Only deliveries parked or whose last attempt failed.") var failed = false
        @Option(help: "How many deliveries, the latest (1 to 1000).") var limit = 50

        func run() async throws {
            let (app, endpoint, failed, limit) = (app, endpoint, failed, limit)
            let deliveries = try await Webhooks.withWebhooks(options) {
                try await $0.deliveries(app: app, endpointID: endpoint, failedOnly: failed, limit: limit)
            }
            guard !deliveries.isEmpty else { return Output.line(failed ? "no failed deliveries" : "no deliveries yet") }
            Output.line("change\tendpoint\tuser\ttype\tstatus\tattempts")
            for delivery in deliveries {
                let next = delivery.nextAttemptAt.map { ", next \($0.formatted(.iso8601))" } ?? ""
                Output.line("\(delivery.changeId)\t\(delivery.endpointId)\t\(delivery.userId)\t\(delivery.type)\t\(delivery.status.rawValue)\(next)\t\(delivery.attempts)")
                for attempt in delivery.history {
                    let answer = attempt.statusCode.map { "HTTP \($0)" } ?? "no answer"
                    let error = attempt.error.map { ": \($0)" } ?? ""
                    let response = attempt.response.flatMap { $0.isEmpty ? nil : " «\(Self.oneLine($0))»" } ?? ""
                    Output.line("  #\(attempt.attempt)\t\(attempt.at.formatted(.iso8601))\t\(answer)\(error)\t\(attempt.durationMs) ms\(response)")
                }
            }
        }

        /// The start of an answer on one line.
        static func oneLine(_ text: String) -> String {
            let flat = text.map { $0.isNewline || $0 == "\t" ? " " : String($0) }.joined()
            return flat.count > 120 ? flat.prefix(120) + "…" : flat
        }
    }

    struct Resend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one change, or every change after a log position, to an endpoint again, now.",
            discussion: """
                The deliveries become pending again, due at once, with a fresh retry schedule; their attempts so far stay \
                listed and the attempt numbers go on. --after also queues the endpoint's changes from before it started.
                """
        )
        @OptionGroup var options: GlobalOptions
        @Argument(help: "The endpoint's id (wh_…).") var id: String
        @Option(help: ArgumentHelp("The change to send again (its webhook-id).", valueName: "chg_…")) var change: String?
        @Option(help: ArgumentHelp("Send every change after this log position again.", valueName: "position")) var after: Int64?

        func validate() throws {
            guard (change == nil) != (after == nil) else { throw ValidationError("give either --change chg_… or --after POSITION") }
        }

        func run() async throws {
            let (id, change, after) = (id, change, after)
            let resent = try await Webhooks.withWebhooks(options) { webhooks -> Int in
                if let change {
                    try await webhooks.resend(endpointID: id, changeID: change)
                    return 1
                }
                return try await webhooks.resend(endpointID: id, after: after ?? 0)
            }
            Output.line(change.map { "\($0) will be sent to \(id) again now" } ?? "\(resent) deliveries after position \(after ?? 0) will be sent to \(id) again now")
        }
    }
}
