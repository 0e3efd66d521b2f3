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
        /// A listener of its own for `/metrics`, open to whoever reaches it; nil for none.
        public var metricsListener: (host: String, port: Int)?

        public init(
            server: LedgerServer.Configuration = .init(), appStore: AppStoreConfiguration = .init(),
            serverAPI: AppStoreServerAPI.Configuration = .init(), entitlementCacheUsers: Int = EntitlementRowCache.defaultCapacity,
            metricsListener: (host: String, port: Int)? = nil
        ) {
            self.server = server
            self.appStore = appStore
            self.serverAPI = serverAPI
            self.entitlementCacheUsers = entitlementCacheUsers
            self.metricsListener = metricsListener
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
            "ledger.max_webhooks_in_flight": "\(server.maximumWebhooksInFlight)",
            "ledger.webhook_body_read_timeout": "\(server.api.webhookBodyReadTimeout)",
            "ledger.metrics": "\(configuration.metricsListener.map { "own listener \($0.host):\($0.port)" } ?? "") \(server.metricsToken == nil ? "API listener: refused (no LEDGER_METRICS_TOKEN)" : "API listener: bearer of LEDGER_METRICS_TOKEN")",
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
        let history = AppStoreServerAPI(configuration: configuration.serverAPI, verifier: server.api.signedPayloads)
        let ledger = PostgresLedger(client: client, secrets: secrets, history: history, changes: changes, logger: logger)
        let http = LedgerServer(configuration: server, services: ledger.services(verifier: verifier, client: client, monitor: monitor, logger: logger),
                                logger: logger)
        // Several servers may share the database (behind a load balancer): one at a time runs the
        // projections, walks Apple's notification history and answers Apple's refund questions;
        // the others stand by.
        let changeWriter = ChangeWriter(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger)
        var companions: [@Sendable () async -> Void] = [
            { await Self.answerConsumptionRequests(ledger.answerConsumptionRequests, logger: logger) },
            { await changeWriter.keepWriting() },
        ]
        // The leading server also sends the apps' changes to their webhook endpoints.
        let webhookClient = HTTPWebhookSender.makeHTTPClient()
        let webhooks = WebhookDelivery(store: ledger.webhookStore, sender: HTTPWebhookSender(client: webhookClient), logger: logger)
        companions.append { await webhooks.run() }
        if let sync = ledger.syncNotifications { companions.append { await Self.walkNotificationHistory(sync, logger: logger) } }
        let projections = ProjectionLeadership(
            runner: ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger),
            configuration: try settings.connectionConfiguration, companions: companions, logger: logger
        )
        let application = http.application(services: [client, monitor, changes, projections]) { boundPort in
            logger.info("ledger serving", metadata: ["ledger.url": "http://\(server.host):\(boundPort)"])
            await onServerRunning(boundPort)
        }
        let deadline = ShutdownDeadline(logger: logger)
        var services: [any Service] = [application, deadline]
        if let metrics = configuration.metricsListener {
            services.append(LedgerServer.metricsApplication(host: metrics.host, port: metrics.port, logger: logger) { boundPort in
                logger.info("metrics served", metadata: ["ledger.url": "http://\(metrics.host):\(boundPort)/metrics"])
            })
        }
        let group = ServiceGroup(configuration: .init(
            services: services,
            gracefulShutdownSignals: gracefulShutdownSignals,
            logger: logger
        ))
        defer { deadline.disarm() }
        do {
            try await group.run()
        } catch {
            try? await appStoreClient.shutdown()
            try? await webhookClient.shutdown()
            throw error
        }
        try await appStoreClient.shutdown()
        try await webhookClient.shutdown()
    }

    /// At start and every `interval`, every app's notification history (apps with a Server API
    /// key), until cancelled.
    static func walkNotificationHistory(_ sync: SyncNotifications, logger: Logger) async {
        while !Task.isCancelled {
            let reports = await sync.walkAll()
            let recovered = reports.reduce(0) { $0 + $1.recovered }
            logger.info("Apple's notification history walked", metadata: [
                "ledger.walks": "\(reports.count)", "ledger.recovered": "\(recovered)",
                "ledger.seen": "\(reports.reduce(0) { $0 + $1.seen })",
            ])
            try? await Task.sleep(for: sync.configuration.interval)
        }
    }

    /// Every `interval`, Apple's refund questions of the last 12 hours that have no answer yet,
    /// until cancelled.
    static func answerConsumptionRequests(_ answering: AnswerConsumptionRequests, logger: Logger) async {
        while !Task.isCancelled {
            let pass = await answering.sweep()
            if pass.accepted + pass.refused + pass.failed > 0 {
                logger.info("Apple's refund questions answered", metadata: [
                    "ledger.accepted": "\(pass.accepted)", "ledger.refused": "\(pass.refused)", "ledger.failed": "\(pass.failed)",
                ])
            }
            try? await Task.sleep(for: answering.configuration.interval)
        }
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
        let publicConnect = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
            try await LedgerDatabase.everyRoleMayConnect(client, logger: logger)
        }
        if publicConnect {
            logger.warning("every login role of the PostgreSQL server may connect to the ledger's database, and so take its advisory locks (the append's, the projections' leadership): as the database's owner, REVOKE CONNECT ON DATABASE … FROM PUBLIC and GRANT CONNECT to ledger_runtime and the owner role")
        }
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
    /// The anchor key of `$LEDGER_ANCHOR_KEY_FILE`, which signs periods closed over HTTP; nil
    /// (closing refused over HTTP, told why) when it is not set or cannot be read.
    static func periodSigner(logger: Logger) -> (any PeriodSigner)? {
        guard let path = ProcessInfo.processInfo.environment["LEDGER_ANCHOR_KEY_FILE"], !path.isEmpty else { return nil }
        do {
            return try AnchorSigningKey.load(from: path)
        } catch {
            logger.error("LEDGER_ANCHOR_KEY_FILE cannot sign closes: \(error.message)")
            return nil
        }
    }

    /// What the HTTP routes call, over this database; `monitor` nil for a server that does not
    /// watch its database (outage errors are still answered 503).
    /// `periodSigner` signs the periods closed over HTTP: by default the key of `$LEDGER_ANCHOR_KEY_FILE`.
    public func services(
        verifier: any ReceiptVerifier, client: DatabasePool, monitor: DatabaseMonitor?, periodSigner: (any PeriodSigner)? = nil, logger: Logger
    ) -> LedgerServices {
        LedgerServices(
            commands: commands, recordFacts: recordFacts, notifications: notifications, waitingNotifications: waitingNotifications,
            consumptionRequests: consumptionRequests, appStore: appStoreQueries,
            reader: handler.reader, store: store, directory: registry, idempotency: idempotency, reads: reads, audit: audit,
            health: PostgresHealthCheck(client: client, monitor: monitor, logger: logger),
            availability: monitor.map { $0 as any DatabaseAvailability } ?? UnmonitoredDatabase(), verifier: verifier,
            reconciliation: reconcileSalesReports, periods: closePeriods, periodSigner: periodSigner ?? Self.periodSigner(logger: logger), metrics: metrics,
            changes: followChanges,
            webhooks: webhooks,
            background: (origins.map { [OriginBackfillService(queue: $0)] } ?? [])
                + [WaitingNotificationsService(waiting: waitingNotifications, logger: logger)]
        )
    }
}

/// Passes waiting notifications on to their users, and expires those no user takes, every
/// `interval` until the server stops (`WaitingNotifications`).
struct WaitingNotificationsService: Service {
    let waiting: WaitingNotifications
    var interval: Duration = .seconds(30)
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let pass = try await waiting.sweep()
                    if pass.delivered + pass.expired > 0 {
                        logger.info("waiting notifications swept", metadata: ["ledger.delivered": "\(pass.delivered)", "ledger.expired": "\(pass.expired)"])
                    }
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("sweeping waiting notifications failed; tried again next time", metadata: ["ledger.error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

/// The queue of unseen purchases' histories as a service of the server's group: worked through
/// until the server stops.
struct OriginBackfillService: Service {
    let queue: OriginBackfills

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await queue.run()
        }
    }
}
