import AppStore
import ArgumentParser
import AsyncHTTPClient
import Foundation
import LedgerHTTP
import LedgerStore
import LocalPostgres
import Logging
import PostgresNIO
import ServiceLifecycle
import UnixSignals

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the ledger's HTTP server (migrating the database first).",
        discussion: """
            With nothing configured it starts the managed local PostgreSQL under .ledger/, applies the
            migrations and listens on 127.0.0.1:8080. Register an app and a key first:
              ledger apps add com.example.app --shared-secret <secret>
              ledger keys create --app com.example.app --scope ingest,read
            Receipts are verified with Apple's verifyReceipt unless LEDGER_APPSTORE_PRODUCTION_URL and
            LEDGER_APPSTORE_SANDBOX_URL (or the flags) point elsewhere, e.g. at `ledger appstore-sim`.
            The configuration in effect is logged at start, secrets masked. Stop with Ctrl-C or SIGTERM:
            requests in flight finish first.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(help: "Address to listen on (default: $LEDGER_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on (default: $LEDGER_PORT or 8080).")
    var port: Int?

    @Option(help: "App Store production verifyReceipt URL (default: $LEDGER_APPSTORE_PRODUCTION_URL or Apple's).")
    var appstoreProductionURL: String?

    @Option(help: "App Store sandbox verifyReceipt URL (default: $LEDGER_APPSTORE_SANDBOX_URL or Apple's).")
    var appstoreSandboxURL: String?

    @Option(help: "Longest a read with minPosition waits for the projections, in milliseconds (default: $LEDGER_READ_WAIT_MS or 5000).")
    var readWaitMs: Int?

    func run() async throws {
        let logger = try options.makeLogger()
        let environment = ProcessInfo.processInfo.environment
        let host = host ?? environment["LEDGER_HOST"] ?? "127.0.0.1"
        let portText = port.map(String.init) ?? environment["LEDGER_PORT"] ?? "8080"
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw CommandFailure(message: "port '\(portText)' (from --port or LEDGER_PORT) is not a number from 0 to 65535")
        }
        let waitText = readWaitMs.map(String.init) ?? environment["LEDGER_READ_WAIT_MS"] ?? "5000"
        guard let wait = Int(waitText), (0...60_000).contains(wait) else {
            throw CommandFailure(message: "read wait '\(waitText)' (from --read-wait-ms or LEDGER_READ_WAIT_MS) is not a number of milliseconds from 0 to 60000")
        }
        var appStore = AppStoreConfiguration.fromEnvironment(environment)
        if let appstoreProductionURL { appStore.productionURL = appstoreProductionURL }
        if let appstoreSandboxURL { appStore.sandboxURL = appstoreSandboxURL }
        for url in [appStore.productionURL, appStore.sandboxURL] where URL(string: url)?.host == nil {
            throw CommandFailure(message: "App Store URL '\(url)' is not an http(s) URL")
        }
        let defaults = LedgerHealth.Thresholds()
        let health = LedgerHealth.Thresholds(
            stall: try Self.seconds("LEDGER_HEALTH_STALL_SECONDS", in: environment) ?? defaults.stall,
            longTransaction: try Self.seconds("LEDGER_HEALTH_TRANSACTION_SECONDS", in: environment) ?? defaults.longTransaction
        )
        let settings = try await options.databaseSettings(logger: logger)
        let configuration = LedgerServer.Configuration(
            host: host, port: port, api: .init(readWaitTimeout: .milliseconds(wait)), health: health
        )
        try await Self.serve(settings: settings, configuration: configuration, appStore: appStore, logger: logger) { _ in }
    }

    /// A whole number of seconds from an environment variable, nil when it is not set.
    static func seconds(_ name: String, in environment: [String: String]) throws -> Duration? {
        guard let text = environment[name] else { return nil }
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw CommandFailure(message: "\(name) '\(text)' is not a whole number of seconds from 1 to 86400")
        }
        return .seconds(seconds)
    }

    /// Migrates, then runs the server and the projection runner until shutdown. The demo runs the same.
    static func serve(
        settings: DatabaseSettings, configuration: LedgerServer.Configuration, appStore: AppStoreConfiguration,
        logger: Logger, gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
        onServerRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        logger.info("configuration", metadata: [
            "ledger.database": "\(settings.url())",
            "ledger.listen": "\(configuration.host):\(configuration.port)",
            "ledger.appstore.production_url": "\(appStore.productionURL)",
            "ledger.appstore.sandbox_url": "\(appStore.sandboxURL)",
            "ledger.appstore.timeout": "\(appStore.timeout)",
            "ledger.read_wait": "\(configuration.api.readWaitTimeout)",
            "ledger.health.stall": "\(configuration.health.stall)",
            "ledger.health.long_transaction": "\(configuration.health.longTransaction)",
            "ledger.body_limit_bytes": "\(APILimits.receiptBodyBytes)",
        ])
        // Before the store, the App Store client and the runner exist: they make their metrics when made.
        LedgerMetrics.bootstrap()
        let (report, apps) = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            let report = try await Migrator.bundled().migrate(client, logger: logger)
            try await ProjectionRunner(client: client, listenConfiguration: nil, logger: logger).prepare()
            return (report, try await AppRegistry(client: client, logger: logger).apps())
        }
        logger.info("database ready", metadata: [
            "ledger.migrations.applied": "\(report.applied.count)",
            "ledger.migrations.present": "\(report.alreadyApplied)",
            "ledger.apps": "\(apps.map(\.bundleId))",
        ])
        if apps.isEmpty {
            logger.notice("no app is registered yet: `ledger apps add BUNDLE_ID` and `ledger keys create --app BUNDLE_ID --scope ingest,read`")
        }

        let client = PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: LedgerDatabase.backgroundLogger(logger))
        let appStoreClient = AppStoreReceiptVerifier.makeHTTPClient()
        let verifier = AppStoreReceiptVerifier(configuration: appStore, httpClient: appStoreClient)
        let server = LedgerServer(configuration: configuration, client: client, verifier: verifier, logger: logger)
        let projections = ProjectionRunner(
            client: client, listenConfiguration: settings.connectionConfiguration, logger: logger
        )
        let application = server.application(services: [client, projections]) { boundPort in
            logger.info("ledger serving", metadata: ["ledger.url": "http://\(configuration.host):\(boundPort)"])
            await onServerRunning(boundPort)
        }
        let group = ServiceGroup(configuration: .init(
            services: [application],
            gracefulShutdownSignals: gracefulShutdownSignals,
            logger: logger
        ))
        do {
            try await group.run()
        } catch {
            try? await appStoreClient.shutdown()
            throw error
        }
        try await appStoreClient.shutdown()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the database migrations that are not applied yet.",
        discussion: "Safe to run twice, or from two processes at once. A migration file edited after it was applied is refused."
    )

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let logger = try options.makeLogger()
        let settings = try await options.databaseSettings(logger: logger)
        let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            try await Migrator.bundled().migrate(client, logger: logger)
        }
        for name in report.applied { Output.line("applied \(name)") }
        Output.line("database \(settings.database) is up to date (\(report.applied.count) applied now, \(report.alreadyApplied) already applied)")
    }
}
