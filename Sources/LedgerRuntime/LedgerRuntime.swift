import AppStore
import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
import Logging
import ServiceLifecycle
import UnixSignals

/// The whole ledger as `ledger serve` runs it: the database prepared, the use cases over
/// PostgreSQL, the HTTP server, the database monitor, what the server keeps in memory and the
/// projections (led by one server of those sharing the database), in one service group.
public enum LedgerRuntime {
    /// Everything `serve` needs besides the database.
    public struct Configuration: Sendable {
        public var server: LedgerServer.Configuration
        /// Where receipts are verified (Apple's `verifyReceipt`, or the simulator's).
        public var appStore: AppStoreConfiguration
        /// Where the App Store Server API is (Apple's, or the simulator's).
        public var serverAPI: AppStoreServerAPI.Configuration
        /// Users whose entitlement rows the server keeps between reads (`EntitlementRowCache`); 0 keeps none.
        public var entitlementCacheUsers: Int

        public init(
            server: LedgerServer.Configuration = .init(), appStore: AppStoreConfiguration = .init(),
            serverAPI: AppStoreServerAPI.Configuration = .init(), entitlementCacheUsers: Int = EntitlementRowCache.defaultCapacity
        ) {
            self.server = server
            self.appStore = appStore
            self.serverAPI = serverAPI
            self.entitlementCacheUsers = entitlementCacheUsers
        }
    }

    /// Migrates (as the owner, when known), seals the shared secrets stored before sealing, then
    /// runs the server and the projection runner as the server's role until shutdown. The demo and
    /// the benchmarks run the same.
    public static func serve(
        roles: DatabaseRoles, configuration: Configuration, secrets: SecretSealer?, logger: Logger,
        gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint], onServerRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        let settings = roles.runtime
        let server = configuration.server
        logger.info("configuration", metadata: [
            "ledger.database": "\(settings.url())",
            "ledger.database.owner": "\(roles.owner.map { $0.url() } ?? "not given: no migrations")",
            "ledger.database.tls": "\(settings.tls.rawValue)\(settings.allowsUnencrypted ? "" : " (never unencrypted)")",
            "ledger.listen": "\(server.host):\(server.port)",
            "ledger.appstore.production_url": "\(URLRedaction.masked(configuration.appStore.productionURL))",
            "ledger.appstore.sandbox_url": "\(URLRedaction.masked(configuration.appStore.sandboxURL))",
            "ledger.appstore.timeout": "\(configuration.appStore.timeout)",
            "ledger.appstore.server_api": "\(URLRedaction.masked(configuration.serverAPI.productionURL)), \(URLRedaction.masked(configuration.serverAPI.sandboxURL))",
            "ledger.read_wait": "\(server.api.readWaitTimeout)",
            "ledger.health.stall": "\(server.health.stall)",
            "ledger.health.long_transaction": "\(server.health.longTransaction)",
            "ledger.body_limit_bytes": "\(APILimits.receiptBodyBytes)",
            "ledger.body_read_timeout": "\(server.api.bodyReadTimeout)",
            "ledger.idle_timeout": "\(server.idleTimeout)",
            "ledger.max_requests_in_flight": "\(server.maximumRequestsInFlight)",
            "ledger.entitlement_cache_users": "\(configuration.entitlementCacheUsers)",
            "ledger.secret_key": "\(secrets.map { "\($0.keyID) from \($0.origin)" } ?? "none")",
        ])
        // Before the store, the App Store client and the runner exist: they make their metrics when made.
        LedgerMetrics.bootstrap()
        try await prepare(roles: roles, secrets: secrets, logger: logger)

        let client = DatabasePool(configuration: settings.clientConfiguration, backgroundLogger: LedgerDatabase.backgroundLogger(logger))
        let appStoreClient = AppStoreReceiptVerifier.makeHTTPClient()
        let verifier = AppStoreReceiptVerifier(configuration: configuration.appStore, httpClient: appStoreClient)
        let monitor = DatabaseMonitor(settings: settings, renewing: client, logger: logger)
        let cache = configuration.entitlementCacheUsers > 0 ? EntitlementRowCache(capacity: configuration.entitlementCacheUsers) : nil
        let changes = ChangeFeed(configuration: try settings.connectionConfiguration, entitlements: cache, logger: logger)
        let http = LedgerServer(configuration: server, client: client, verifier: verifier, secrets: secrets, serverAPI: configuration.serverAPI,
                                monitor: monitor, changes: changes, logger: logger)
        // Several servers may share the database (behind a load balancer): one at a time runs the
        // projections, the others stand by.
        let projections = ProjectionLeadership(
            runner: ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger),
            configuration: try settings.connectionConfiguration, logger: logger
        )
        let application = http.application(services: [client, monitor, changes, projections]) { boundPort in
            logger.info("ledger serving", metadata: ["ledger.url": "http://\(server.host):\(boundPort)"])
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
            throw error
        }
        try await appStoreClient.shutdown()
    }

    /// Migrates as the owner (when known), registers the projections, seals the shared secrets
    /// stored before sealing, and says in the log what it found.
    static func prepare(roles: DatabaseRoles, secrets: SecretSealer?, logger: Logger) async throws {
        let report = try await roles.prepareSchema(logger: logger)
        let (apps, sealed, unreadable) = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
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
    }
}

extension PostgresLedger {
    /// What the HTTP routes call, over this database; `monitor` nil for a server that does not
    /// watch its database (outage errors are still answered 503).
    public func services(verifier: any ReceiptVerifier, client: DatabasePool, monitor: DatabaseMonitor?, logger: Logger) -> LedgerServices {
        LedgerServices(
            commands: commands, recordFacts: recordFacts, notifications: notifications, consumptionRequests: consumptionRequests,
            reader: handler.reader, store: store, directory: registry, idempotency: idempotency, reads: reads, audit: audit,
            health: PostgresHealthCheck(client: client, monitor: monitor, logger: logger),
            availability: monitor.map { $0 as any DatabaseAvailability } ?? UnmonitoredDatabase(), verifier: verifier
        )
    }
}
