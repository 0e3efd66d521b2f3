import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres

/// `ledger appstore …`: asking Apple, on the operator's behalf.
struct AppStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore",
        abstract: "Ask the App Store Server API and record what it says.",
        subcommands: [Backfill.self, Sync.self, Status.self, Order.self, TestNotification.self]
    )

    struct Backfill: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record a customer's whole App Store transaction history for a user.",
            discussion: """
                Asks the App Store Server API (Get Transaction History) for every transaction of the customer who made \
                --transaction, with the app's key (`ledger apps appstore-key`), verifies each signed transaction (Apple's \
                chain, the bundle id, the environment) and records them for --user as facts, like a post of those \
                transactions: what the user's stream holds already is a duplicate, and transactions another user of the \
                app holds stay theirs. Without --environment, production first, then the sandbox. Use it for purchases \
                made before the ledger, or lost posts. The API's URLs: $LEDGER_APPSTORE_SERVER_API_PRODUCTION_URL and \
                $LEDGER_APPSTORE_SERVER_API_SANDBOX_URL (default: Apple's); the simulator's root is trusted with \
                --trust-simulator-root (or $LEDGER_TRUST_SIMULATOR_ROOT).
                """
        )
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "The ledger's user the transactions are recorded for.") var user: String
        @Option(help: "Any transaction id of the customer (the original transaction id works).") var transaction: String
        @Option(help: "production or sandbox (default: production, then sandbox).") var environment: String?
        @Option(help: ArgumentHelp("Also trust this PEM root for signed transactions (the simulator's).", valueName: "file"))
        var trustSimulatorRoot: String?

        func run() async throws {
            let logger = try options.makeLogger()
            let variables = ProcessInfo.processInfo.environment
            var environment: StoreEnvironment?
            if let name = self.environment {
                guard let parsed = StoreEnvironment(rawValue: name) else { throw CommandFailure(message: "--environment is production or sandbox, not '\(name)'") }
                environment = parsed
            }
            let verifier = try ServeOptions.signedPayloadVerifier(trustSimulatorRoot ?? variables["LEDGER_TRUST_SIMULATOR_ROOT"], logger: logger)
            let secrets = try options.secretSealer()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (app, user, transaction, chosen) = (app, user, transaction, environment)
            let history = AppStoreServerAPI(configuration: .fromEnvironment(variables), verifier: verifier)
            let result: BackfillHistory.Result
            do {
                result = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                    let ledger = PostgresLedger(client: client, secrets: secrets, logger: logger)
                    let backfill = BackfillHistory(handler: ledger.handler, archive: ledger.archive, inbox: ledger.inbox, directory: ledger.registry,
                                                   source: history, logger: logger)
                    return try await backfill(app: app, user: user, transactionId: transaction, environment: chosen)
                }
            } catch let error as BackfillError {
                throw CommandFailure(message: error.message)
            } catch let error as TransactionHistoryError {
                throw CommandFailure(message: "\(error.description); nothing was recorded")
            }
            let recording = result.recording
            Output.line("\(app), \(user): Apple's \(result.environment.rawValue) history of \(transaction) lists \(result.fetched) transaction(s)")
            for item in recording.recorded {
                Output.line("  recorded at \(item.position): " + [item.kind, item.transactionId, item.productId].compactMap { $0 }.joined(separator: " "))
            }
            if !recording.duplicates.isEmpty { Output.line("  already recorded: \(recording.duplicates.map(\.transactionId).joined(separator: ", "))") }
            if !recording.notRecorded.isEmpty { Output.line("  held by another user of the app, not recorded: \(recording.notRecorded.joined(separator: ", "))") }
            Output.line(recording.recorded.isEmpty ? "nothing new (log position \(recording.position))" : "log position \(recording.position)")
        }
    }
}
