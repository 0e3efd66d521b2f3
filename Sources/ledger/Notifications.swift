import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore

struct Notifications: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apple's notifications no user took: waiting, or expired unclaimed.",
        subcommands: [List.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the app's notifications no user took yet (oldest first), or those that expired unclaimed (newest first).",
            discussion: """
                A notification whose transaction no user holds waits on the app's notifications stream: a post \
                of its transaction takes it, and one whose appAccountToken the app's server bound goes to that \
                user after a 10-minute grace. One that waited 30 days with no user is marked expired; a post of \
                its transaction still takes it. To give one to its user, have the app post the user's \
                transaction (or run `ledger appstore backfill --app A --user U --transaction T`).
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.")
        var app: String

        @Flag(help: "Those that expired unclaimed instead of those waiting.")
        var expired = false

        @Option(help: "At most this many (1 to 10000).")
        var limit = 100

        @Flag(help: "JSON lines instead of a table.")
        var json = false

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let (app, state, limit) = (app, expired ? UnclaimedNotification.State.expired : .waiting, limit)
            let found = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                let registry = AppRegistry(client: client, logger: logger)
                guard try await registry.isRegistered(app) else {
                    throw CommandFailure(message: "--app: no app '\(app)' is registered (registered: \(try await registry.bundleIDs().joined(separator: ", ")); see `ledger apps list`)")
                }
                return try await PostgresLedger(client: client, logger: logger).waitingNotifications.list(app: app, state: state, limit: limit)
            }
            if json {
                for item in found {
                    let fields: [String: Any] = [
                        "notificationUUID": item.notification.notificationUUID, "notificationType": item.notification.notificationType,
                        "subtype": item.notification.subtype ?? NSNull(), "environment": item.notification.environment.rawValue,
                        "originalTransactionId": item.notification.originalTransactionId ?? NSNull(),
                        "appAccountToken": item.notification.appAccountToken ?? NSNull(), "position": item.position,
                        "recordedAt": LedgerJSON.formatTimestamp(item.recordedAt),
                        "expiredAt": item.expiredAt.map(LedgerJSON.formatTimestamp) ?? NSNull(),
                    ]
                    let data = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
                    Output.line(String(decoding: data, as: UTF8.self))
                }
                return
            }
            guard !found.isEmpty else {
                Output.line(state == .waiting ? "no notification of \(app) is waiting for its user" : "no notification of \(app) expired unclaimed")
                return
            }
            Table.print(
                header: ["recorded", "type", "environment", "original transaction", "token", state == .waiting ? "position" : "expired"],
                rows: found.map { item in
                    [LedgerJSON.formatTimestamp(item.recordedAt),
                     item.notification.notificationType + (item.notification.subtype.map { "/\($0)" } ?? ""),
                     item.notification.environment.rawValue, item.notification.originalTransactionId ?? "",
                     item.notification.appAccountToken ?? "",
                     state == .waiting ? String(item.position) : item.expiredAt.map(LedgerJSON.formatTimestamp) ?? ""]
                }
            )
        }
    }
}
