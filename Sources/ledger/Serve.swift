import AppStore
import ArgumentParser
import AsyncHTTPClient
import Foundation
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LocalPostgres
import Logging
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization
import UnixSignals

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the ledger's HTTP server (migrating the database first).",
        discussion: """
            With nothing configured it starts the managed local PostgreSQL under .ledger/, applies the \
            migrations and listens on 127.0.0.1:8080. Register an app and a key first:
              ledger apps add com.example.app --shared-secret <secret>
              ledger keys create --app com.example.app --scope ingest,read
            Receipts are verified with Apple's verifyReceipt unless LEDGER_APPSTORE_PRODUCTION_URL and \
            LEDGER_APPSTORE_SANDBOX_URL (or the flags) point elsewhere, e.g. at `ledger appstore-sim`.

            App Store shared secrets are stored sealed with the key of LEDGER_SECRET_KEY (base64 of 32 \
            bytes) or LEDGER_SECRET_KEY_FILE (a file only its owner can read); with the managed \
            PostgreSQL and neither set, with .ledger/secret.key, made on first use. Secrets stored before \
            sealing are sealed at start.

            Without sslmode in LEDGER_DATABASE_URL, a host other than loopback is reached over TLS only \
            (sslmode=require); verify-full with sslrootcert=FILE also checks the server's certificate.

            Slow or numerous clients are bounded: a connection idle for --idle-timeout-ms is closed, a \
            request body must arrive within --body-read-timeout-ms (else 408), and API requests past \
            --max-requests-in-flight get 503 with Retry-After at once.

            The configuration in effect is logged at start, secrets masked. Stop with Ctrl-C or SIGTERM: \
            requests in flight finish first.

            Two database roles: the server runs as --database-url's role, which may read, append through \
            ledger.append and write derived tables, and owns nothing; migrations run as the owner \
            (--owner-database-url). The managed PostgreSQL has both. With another server and no owner URL, \
            serve checks that no migration is pending instead of migrating.
            """
    )

    @Flag(inversion: .prefixedNo, help: "Migrate as the owner before serving, when the owner's URL is known.")
    var migrate = true

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

    @Option(help: "Close a connection that sends nothing for this long, in milliseconds (default: $LEDGER_IDLE_TIMEOUT_MS or 30000).")
    var idleTimeoutMs: Int?

    @Option(help: "Longest a request body may take to arrive, in milliseconds; then 408 (default: $LEDGER_BODY_READ_TIMEOUT_MS or 30000).")
    var bodyReadTimeoutMs: Int?

    @Option(help: "API requests answered at once; more get 503 with Retry-After (default: $LEDGER_MAX_REQUESTS_IN_FLIGHT or 256).")
    var maxRequestsInFlight: Int?

    @Option(help: ArgumentHelp(
        "Users whose entitlement rows this server keeps in memory between reads, 0 for none (default: $LEDGER_ENTITLEMENT_CACHE_USERS or 200000).",
        discussion: "A kept user is forgotten as soon as an event of theirs, or of the app's catalog, reaches the projections."
    ))
    var entitlementCacheUsers: Int?

    @Option(help: ArgumentHelp(
        "Also trust this PEM root for StoreKit 2 transactions and App Store notifications (default: $LEDGER_TRUST_SIMULATOR_ROOT; none).",
        discussion: "For the simulator's test root (ledger appstore-sim --root-out FILE). Apple's root is always trusted; never set this in production."
    ))
    var trustSimulatorRoot: String?

    func run() async throws {
        let logger = try options.makeLogger()
        let environment = ProcessInfo.processInfo.environment
        let host = host ?? environment["LEDGER_HOST"] ?? "127.0.0.1"
        func number(_ flag: Int?, _ option: String, _ variable: String, default value: Int, _ range: ClosedRange<Int>, _ what: String) throws -> Int {
            let text = flag.map(String.init) ?? environment[variable] ?? String(value)
            guard let number = Int(text), range.contains(number) else {
                throw CommandFailure(message: "\(what) '\(text)' (from \(option) or \(variable)) is not a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        let port = try number(self.port, "--port", "LEDGER_PORT", default: 8080, 0...65535, "port")
        let wait = try number(readWaitMs, "--read-wait-ms", "LEDGER_READ_WAIT_MS", default: 5000, 0...60_000, "read wait in milliseconds")
        let idle = try number(idleTimeoutMs, "--idle-timeout-ms", "LEDGER_IDLE_TIMEOUT_MS", default: 30_000, 100...3_600_000,
                              "idle timeout in milliseconds")
        let bodyRead = try number(bodyReadTimeoutMs, "--body-read-timeout-ms", "LEDGER_BODY_READ_TIMEOUT_MS", default: 30_000,
                                  100...3_600_000, "body read timeout in milliseconds")
        let inFlight = try number(maxRequestsInFlight, "--max-requests-in-flight", "LEDGER_MAX_REQUESTS_IN_FLIGHT", default: 256,
                                  1...100_000, "requests in flight")
        let cacheUsers = try number(entitlementCacheUsers, "--entitlement-cache-users", "LEDGER_ENTITLEMENT_CACHE_USERS",
                                    default: EntitlementRowCache.defaultCapacity, 0...100_000_000, "entitlement cache size in users")
        var appStore = AppStoreConfiguration.fromEnvironment(environment)
        if let appstoreProductionURL { appStore.productionURL = appstoreProductionURL }
        if let appstoreSandboxURL { appStore.sandboxURL = appstoreSandboxURL }
        for url in [appStore.productionURL, appStore.sandboxURL] where URL(string: url)?.host == nil {
            throw CommandFailure(message: "App Store URL '\(URLRedaction.masked(url))' is not an http(s) URL")
        }
        let defaults = LedgerHealth.Thresholds()
        let health = LedgerHealth.Thresholds(
            stall: try Self.seconds("LEDGER_HEALTH_STALL_SECONDS", in: environment) ?? defaults.stall,
            longTransaction: try Self.seconds("LEDGER_HEALTH_TRANSACTION_SECONDS", in: environment) ?? defaults.longTransaction
        )
        let signedPayloads = try Self.signedPayloadVerifier(trustSimulatorRoot ?? environment["LEDGER_TRUST_SIMULATOR_ROOT"], logger: logger)
        let secrets = try options.secretSealer()
        var roles = try await options.databaseRoles(logger: logger)
        if !migrate { roles.owner = nil }
        let configuration = LedgerServer.Configuration(
            host: host, port: port,
            api: .init(readWaitTimeout: .milliseconds(wait), bodyReadTimeout: .milliseconds(bodyRead), signedPayloads: signedPayloads,
                       serverAPI: .fromEnvironment(environment)),
            idleTimeout: .milliseconds(idle), maximumRequestsInFlight: inFlight, health: health,
            entitlementCacheUsers: cacheUsers
        )
        try await Self.serve(roles: roles, configuration: configuration, appStore: appStore, secrets: secrets, logger: logger) { _ in }
    }

    /// Apple's root, and a test root only when told (with a warning: it must never reach production).
    static func signedPayloadVerifier(_ testRoot: String?, logger: Logger) throws -> SignedPayloadVerifier {
        do {
            let verifier = try SignedPayloadVerifier.trusting(testRootPEM: testRoot.flatMap { $0.isEmpty ? nil : $0 })
            if testRoot?.isEmpty == false {
                logger.warning("trusting a test root for signed payloads besides Apple's: StoreKit 2 transactions and notifications it signs are recorded; never in production",
                               metadata: ["ledger.signed_payload_roots": "\(verifier.trustedRootSubjects.joined(separator: "; "))"])
            }
            return verifier
        } catch let error as TestRootError {
            throw CommandFailure(message: "--trust-simulator-root (or LEDGER_TRUST_SIMULATOR_ROOT): \(error.message)")
        }
    }

    /// A whole number of seconds from an environment variable, nil when it is not set.
    /// The socket's refusal to listen in words, with what to do; any other error as it is.
    static func listening(_ error: any Error, on configuration: LedgerServer.Configuration) -> any Error {
        guard let error = error as? IOError else { return error }
        let address = "\(configuration.host):\(configuration.port)"
        switch error.errnoCode {
        case EADDRINUSE:
            return CommandFailure(message: "cannot listen on \(address): another program listens there (another `ledger serve`?); stop it, or choose another port with --port")
        case EADDRNOTAVAIL:
            return CommandFailure(message: "cannot listen on \(address): no network interface of this machine has that address; check --host")
        case EACCES:
            return CommandFailure(message: "cannot listen on \(address): not permitted (ports below 1024 need privileges); choose another port with --port")
        default:
            return error
        }
    }

    static func seconds(_ name: String, in environment: [String: String]) throws -> Duration? {
        guard let text = environment[name] else { return nil }
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw CommandFailure(message: "\(name) '\(text)' is not a whole number of seconds from 1 to 86400")
        }
        return .seconds(seconds)
    }

    /// Migrates (as the owner, when known), seals the shared secrets stored before sealing, then
    /// runs the server and the projection runner as the server's role until shutdown. The demo runs the same.
    static func serve(
        roles: DatabaseRoles, configuration: LedgerServer.Configuration, appStore: AppStoreConfiguration,
        secrets: SecretSealer?, logger: Logger, gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
        onServerRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        let settings = roles.runtime
        logger.info("configuration", metadata: [
            "ledger.database": "\(settings.url())",
            "ledger.database.owner": "\(roles.owner.map { $0.url() } ?? "not given: no migrations")",
            "ledger.database.tls": "\(settings.tls.rawValue)\(settings.allowsUnencrypted ? "" : " (never unencrypted)")",
            "ledger.listen": "\(configuration.host):\(configuration.port)",
            "ledger.appstore.production_url": "\(URLRedaction.masked(appStore.productionURL))",
            "ledger.appstore.sandbox_url": "\(URLRedaction.masked(appStore.sandboxURL))",
            "ledger.appstore.timeout": "\(appStore.timeout)",
            "ledger.appstore.server_api": "\(URLRedaction.masked(configuration.api.serverAPI.productionURL)), \(URLRedaction.masked(configuration.api.serverAPI.sandboxURL))",
            "ledger.read_wait": "\(configuration.api.readWaitTimeout)",
            "ledger.health.stall": "\(configuration.health.stall)",
            "ledger.health.long_transaction": "\(configuration.health.longTransaction)",
            "ledger.body_limit_bytes": "\(APILimits.receiptBodyBytes)",
            "ledger.body_read_timeout": "\(configuration.api.bodyReadTimeout)",
            "ledger.idle_timeout": "\(configuration.idleTimeout)",
            "ledger.max_requests_in_flight": "\(configuration.maximumRequestsInFlight)",
            "ledger.entitlement_cache_users": "\(configuration.entitlementCacheUsers)",
            "ledger.secret_key": "\(secrets.map { "\($0.keyID) from \($0.origin)" } ?? "none")",
        ])
        if let failpoint = Failpoint.armed {
            logger.warning("fault injection armed: this process kills itself at a failpoint (LEDGER_FAILPOINT); never set it in production",
                           metadata: ["ledger.failpoint": "\(failpoint.rawValue)"])
        }
        // Before the store, the App Store client and the runner exist: they make their metrics when made.
        LedgerMetrics.bootstrap()
        let report = try await roles.prepareSchema(logger: logger)
        let (apps, sealed, unreadable) = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            try await ProjectionRunner(client: client, listenConfiguration: nil, logger: logger).prepare()
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            let sealed = try await registry.sealPlaintextSecrets()
            return (try await registry.apps(), sealed, try await registry.unreadableSecrets())
        }
        logger.info("database ready", metadata: [
            "ledger.migrations.applied": "\(report.applied.count)",
            "ledger.migrations.present": "\(report.alreadyApplied)",
            "ledger.apps": "\(apps.map(\.bundleId))",
            "ledger.secrets_sealed_now": "\(sealed)",
        ])
        if apps.isEmpty {
            logger.notice("no app is registered yet: `ledger apps add BUNDLE_ID` and `ledger keys create --app BUNDLE_ID --scope ingest,read`")
        }
        let unsealed = apps.filter { $0.hasSharedSecret && !$0.sharedSecretSealed }.map(\.bundleId)
        if !unsealed.isEmpty {
            logger.warning("shared secrets stored unsealed: set LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE and restart to seal them", metadata: [
                "ledger.apps": "\(unsealed)",
            ])
        }
        for (app, error) in unreadable {
            logger.error("shared secret unreadable: receipts of this app are refused until it is fixed", metadata: [
                "ledger.app": "\(app)", "ledger.error": "\(error.message)",
            ])
        }

        let client = DatabasePool(configuration: settings.clientConfiguration, backgroundLogger: LedgerDatabase.backgroundLogger(logger))
        let appStoreClient = AppStoreReceiptVerifier.makeHTTPClient()
        let verifier = AppStoreReceiptVerifier(configuration: appStore, httpClient: appStoreClient)
        let monitor = DatabaseMonitor(settings: settings, renewing: client, logger: logger)
        let changes = ChangeFeed(configuration: try settings.connectionConfiguration, entitlements: configuration.makeEntitlementCache(),
                                 logger: logger)
        let server = LedgerServer(configuration: configuration, client: client, verifier: verifier, secrets: secrets, monitor: monitor,
                                  changes: changes, logger: logger)
        // Several servers may share the database (behind a load balancer): one at a time runs the
        // projections, the others stand by.
        let projections = ProjectionLeadership(
            runner: ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger),
            configuration: try settings.connectionConfiguration, logger: logger
        )
        let application = server.application(services: [client, monitor, changes, projections]) { boundPort in
            logger.info("ledger serving", metadata: ["ledger.url": "http://\(configuration.host):\(boundPort)"])
            await onServerRunning(boundPort)
        }
        let deadline = ShutdownDeadline(logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [application, deadline],
            gracefulShutdownSignals: gracefulShutdownSignals,
            logger: logger
        ))
        defer { deadline.disarm() }
        do {
            try await group.run()
        } catch {
            try? await appStoreClient.shutdown()
            throw Self.listening(error, on: configuration)
        }
        try await appStoreClient.shutdown()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the database migrations that are not applied yet.",
        discussion: """
            Runs as the owner: --owner-database-url or $LEDGER_OWNER_DATABASE_URL, else the managed server's owner, \
            else the one URL given (--database-url or $LEDGER_DATABASE_URL), which then must not be the server's role. \
            Safe to run twice, or from two processes at once. A migration file edited after it was applied is refused. \
            On a server the ledger does not manage, create the server's group role first, as a superuser: \
            CREATE ROLE ledger_runtime NOLOGIN; GRANT ledger_runtime TO <the role ledger serve logs in as>.
            """
    )

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let logger = try options.makeLogger()
        let roles = try await options.databaseRoles(logger: logger)
        var settings = roles.owner ?? roles.runtime
        settings.sessionSettings = [:]
        let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            try await Migrator.bundled().migrate(client, logger: logger)
        }
        for name in report.applied { Output.line("applied \(name)") }
        Output.line("database \(settings.database) is up to date (\(report.applied.count) applied now, \(report.alreadyApplied) already applied)")
    }
}

/// Ends the process if a graceful shutdown has not ended the server within `patience`.
///
/// The HTTP server's graceful shutdown waits for every request it has, and the waits postgres-nio
/// can leave unanswered are given up (see `unlessClosed`), but should anything still wait, the
/// process must not hang. Nothing is lost by leaving: every write is one transaction, committed or
/// not. `disarm()` once the server has stopped: the process may have more to do (a benchmark).
final class ShutdownDeadline: Service, Sendable {
    static let patience = Duration.seconds(15)
    private let logger: Logger
    private let timer = Mutex<Task<Void, Never>?>(nil)

    init(logger: Logger) {
        self.logger = logger
    }

    func run() async throws {
        try? await gracefulShutdown()
        guard !Task.isCancelled else { return }
        let logger = logger
        // Detached: the group cancels its services' tasks as it shuts down; this must outlive them.
        let task = Task.detached {
            try? await Task.sleep(for: Self.patience)
            guard !Task.isCancelled else { return }
            logger.error("shutdown did not finish within \(Self.patience): a request or a projection batch still waits; exiting now (a write not yet committed was not recorded: sent again, it is recorded once)")
            exit(EXIT_FAILURE)
        }
        timer.withLock { $0 = task }
    }

    func disarm() {
        timer.withLock { $0 }?.cancel()
    }
}
