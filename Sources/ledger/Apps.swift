import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerStore
import LocalPostgres

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "Register the apps the ledger records purchases for.",
        subcommands: [Add.self, List.self, AppStoreKey.self, ConsumptionAnswers.self]
    )

    struct AppStoreKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "appstore-key",
            abstract: "Give an app its App Store Server API key (for `ledger appstore backfill` and restores of unseen purchases).",
            discussion: """
                The key comes from App Store Connect (Users and Access > Integrations > In-App Purchase): its key id, \
                the team's issuer id, and the private key file (SubscriptionKey_<key id>.p8, PEM). The private key is \
                stored sealed (AES-256-GCM) with the key of LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE, like the \
                shared secret; it is never logged, printed or returned. Running this again replaces the key.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Argument(help: "The app's bundle id (registered with `ledger apps add`).")
        var bundleId: String

        @Option(help: "The key's id in App Store Connect.")
        var keyId: String

        @Option(help: "The issuer id of the team's keys in App Store Connect.")
        var issuerId: String

        @Option(help: ArgumentHelp("The private key file (.p8, PEM).", valueName: "file"))
        var privateKey: String

        func run() async throws {
            let logger = try options.makeLogger()
            let pem: String
            do {
                pem = try String(contentsOfFile: privateKey, encoding: .utf8)
            } catch {
                throw CommandFailure(message: "cannot read the private key file '\(privateKey)': \(error.localizedDescription)")
            }
            do {
                _ = try AppStoreServerAPIKey(keyID: keyId, issuerID: issuerId, privateKeyPEM: pem)
            } catch {
                throw CommandFailure(message: "\(privateKey): \(error.description)")
            }
            let secrets = try options.secretSealer()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (bundleId, keyId, issuerId) = (bundleId, keyId, issuerId)
            do {
                try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                    let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
                    try await registry.setServerAPIKey(.init(keyID: keyId, issuerID: issuerId, privateKeyPEM: pem), of: bundleId)
                }
            } catch let error as SecretError {
                throw CommandFailure(message: error.message)
            } catch let error as AccessError {
                throw CommandFailure(message: error.message)
            }
            Output.line("\(bundleId): App Store Server API key \(keyId) (issuer \(issuerId)) stored, its private key sealed")
        }
    }

    struct ConsumptionAnswers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "consumption-answers",
            abstract: "Show or set how the ledger answers Apple's refund questions (CONSUMPTION_REQUEST) for an app.",
            discussion: """
                When a customer asks Apple for a refund, Apple sends a CONSUMPTION_REQUEST and takes the app's account \
                of the purchase for 12 hours (Send Consumption Information). The server that leads the projections \
                answers from the user's facts (delivered or not, the share of a consumable used), with the app's \
                refund preference and whether it gives a sample before the purchase; only for users whose consent the \
                app reported (PUT …/users/{userId}/consumption-consent), and only with the app's App Store Server API \
                key. On by default. With no option, shows the settings.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Argument(help: "The app's bundle id.") var bundleId: String
        @Flag(inversion: .prefixedNo, help: "Answer Apple's refund questions (--answer), or not (--no-answer).") var answer: Bool?
        @Option(help: "The app's refund preference: DECLINE, GRANT_FULL, GRANT_PRORATED, or none.") var refundPreference: String?
        @Option(help: "Whether the app gives a free sample, a trial or a description of the content before the purchase (true/false).")
        var sampleContentProvided: Bool?

        func run() async throws {
            let logger = try options.makeLogger()
            var preference: String??
            if let text = refundPreference {
                let upper = text.uppercased()
                guard upper == "NONE" || ConsumptionAnswerSettings.refundPreferences.contains(upper) else {
                    throw CommandFailure(message: "--refund-preference is DECLINE, GRANT_FULL, GRANT_PRORATED or none, not '\(text)'")
                }
                preference = .some(upper == "NONE" ? nil : upper)
            }
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (bundleId, answer, sample) = (bundleId, answer, sampleContentProvided)
            let changed = answer != nil || preference != nil || sample != nil
            let settings: ConsumptionAnswerSettings
            do {
                settings = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { [preference] client in
                    let registry = AppRegistry(client: client, logger: logger)
                    var settings = try await registry.consumptionAnswerSettings(of: bundleId)
                    guard changed else { return settings }
                    if let answer { settings.answering = answer }
                    if let preference { settings.refundPreference = preference }
                    if let sample { settings.sampleContentProvided = sample }
                    try await registry.setConsumptionAnswerSettings(settings, of: bundleId)
                    return settings
                }
            } catch let error as AccessError {
                throw CommandFailure(message: error.message)
            }
            Output.line("\(bundleId): Apple's refund questions \(settings.answering ? "answered" : "not answered")\(changed ? " (saved)" : "")")
            Output.line("  refund preference: \(settings.refundPreference ?? "none")")
            Output.line("  sample content provided before purchase: \(settings.sampleContentProvided)")
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an app (or set its shared secret).",
            discussion: """
                The shared secret (App Store Connect, for receipts with auto-renewable subscriptions) is stored \
                sealed (AES-256-GCM) with the key of LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE (with the \
                managed PostgreSQL and neither set, .ledger/secret.key, made on first use); it is never logged, \
                printed or returned by the API. Running this again with another secret replaces it. Prefer \
                --shared-secret-env over the flag on shared machines: a flag shows in the process list.
                """
        )
        @OptionGroup var options: GlobalOptions

        @Argument(help: "The app's bundle id, e.g. com.example.app.")
        var bundleId: String

        @Option(help: "The app's App Store shared secret.")
        var sharedSecret: String?

        @Option(help: "Read the shared secret from this environment variable instead.")
        var sharedSecretEnv: String?

        func run() async throws {
            let logger = try options.makeLogger()
            var secret = sharedSecret
            if let sharedSecretEnv {
                guard let value = ProcessInfo.processInfo.environment[sharedSecretEnv], !value.isEmpty else {
                    throw CommandFailure(message: "environment variable \(sharedSecretEnv) is not set")
                }
                secret = value
            }
            let secrets = try options.secretSealer()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (bundleId, finalSecret) = (bundleId, secret)
            let created: Bool
            do {
                created = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                    let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
                    try await registry.sealPlaintextSecrets()
                    return try await registry.addApp(bundleId, sharedSecret: finalSecret)
                }
            } catch let error as SecretError {
                throw CommandFailure(message: error.message)
            } catch let error as AccessError {
                throw CommandFailure(message: error.message)
            }
            Output.line(created ? "registered \(bundleId)\(finalSecret == nil ? " (no shared secret)" : " with its shared secret")"
                                : "\(bundleId) was registered; \(finalSecret == nil ? "nothing changed" : "shared secret replaced")")
            if created { Output.line("next: ledger keys create --app \(bundleId) --scope ingest,read") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List registered apps.")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let secrets = try options.secretSealer()
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (apps, unreadable) = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
                try await registry.sealPlaintextSecrets()
                return (try await registry.apps(), try await registry.unreadableSecrets())
            }
            guard !apps.isEmpty else { return Output.line("no apps registered; `ledger apps add BUNDLE_ID` registers one") }
            let unreadableApps = Set(unreadable.map(\.app))
            Output.line("bundle id\tshared secret\tactive keys\tregistered")
            for app in apps {
                let secret = !app.hasSharedSecret ? "none"
                    : !app.sharedSecretSealed ? "set (not sealed: no key configured)"
                    : unreadableApps.contains(app.bundleId) ? "set (sealed, does not open with the configured key)"
                    : "set (sealed)"
                Output.line("\(app.bundleId)\t\(secret)\t\(app.activeKeys)\t\(app.createdAt.formatted(.iso8601))")
            }
            for (_, error) in unreadable { Output.error(error.message) }
        }
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Create, list and revoke API keys.",
        discussion: """
            A key belongs to one app and has scopes: ingest (post receipts and app events), read (entitlements, \
            balances, history), finance (the audit routes, read-only) and admin (products, revocations). \
            Only the key's hash is stored: the key is printed once, at creation.
            """,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a key and print it (once).")
        @OptionGroup var options: GlobalOptions

        @Option(help: "The app's bundle id.")
        var app: String

        @Option(help: "Comma-separated scopes: ingest, read, finance, admin.")
        var scope: String

        @Option(help: "A name to recognise the key by in `keys list`.")
        var name: String?

        func run() async throws {
            let logger = try options.makeLogger()
            let scopes: Set<APIScope>
            do { scopes = try APIScope.parse(scope.split(separator: ",").map(String.init)) } catch { throw CommandFailure(message: error.message) }
            let roles = try await options.databaseRoles(logger: logger)
            try await roles.prepareSchema(logger: logger)
            let (app, name) = (app, name)
            let issued: IssuedAPIKey
            do {
                issued = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                    try await AppRegistry(client: client, logger: logger).createKey(app: app, scopes: scopes, name: name)
                }
            } catch let error as AccessError {
                throw CommandFailure(message: error.message)
            }
            Output.line(issued.token)
            Output.error("key \(issued.key.keyId) for \(app), scopes \(issued.key.scopes.sorted().map(\.rawValue).joined(separator: ",")): store it now, it is not shown again")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never their secrets).")
        @OptionGroup var options: GlobalOptions

        @Option(help: "Only this app's keys.")
        var app: String?

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let app = app
            let keys = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                try await AppRegistry(client: client, logger: logger).keys(app: app)
            }
            guard !keys.isEmpty else { return Output.line("no keys; `ledger keys create --app BUNDLE_ID --scope read` creates one") }
            Output.line("key id\tapp\tscopes\tname\tcreated\tstate")
            for key in keys {
                Output.line([key.keyId, key.app, key.scopes.sorted().map(\.rawValue).joined(separator: ","), key.name ?? "-",
                             key.createdAt.formatted(.iso8601), key.revokedAt.map { "revoked \($0.formatted(.iso8601))" } ?? "active"]
                    .joined(separator: "\t"))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key: it stops working at once.")
        @OptionGroup var options: GlobalOptions

        @Argument(help: "The key id (from `keys list`) or the whole key.")
        var key: String

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let key = key
            do {
                let revoked = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                    try await AppRegistry(client: client, logger: logger).revokeKey(key)
                }
                Output.line("revoked \(revoked.keyId) of \(revoked.app)")
            } catch let error as AccessError {
                throw CommandFailure(message: error.message)
            }
        }
    }
}
