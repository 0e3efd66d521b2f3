import AppStore
import Hummingbird
import LedgerStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// The ledger's HTTP server: its routes over the store, as a service of the caller's group.
public struct LedgerServer: Sendable {
    /// Where the server listens, how the API behaves, and what a client may hold of it.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var api: LedgerAPI.Configuration
        /// A connection that has sent nothing for this long, between requests or within a request's
        /// head or body, is closed (a request being answered is never cut off).
        public var idleTimeout: Duration
        /// API requests (`/v1/…`) answered at once; beyond it, 503 `overloaded` with `Retry-After`,
        /// before any work. Health, metrics and the OpenAPI document are not counted.
        public var maximumRequestsInFlight: Int
        /// When `/health` calls a projection stalled and a transaction long.
        public var health: LedgerHealth.Thresholds
        /// Users whose entitlement rows the server keeps between reads (`EntitlementRowCache`); 0 keeps none.
        /// The server's `ChangeFeed` holds the cache: make it with `makeEntitlementCache()`.
        public var entitlementCacheUsers: Int

        /// The cache `entitlementCacheUsers` asks for, nil for none.
        public func makeEntitlementCache() -> EntitlementRowCache? {
            entitlementCacheUsers > 0 ? EntitlementRowCache(capacity: entitlementCacheUsers) : nil
        }

        public init(
            host: String = "127.0.0.1", port: Int = 8080, api: LedgerAPI.Configuration = .init(),
            idleTimeout: Duration = .seconds(30), maximumRequestsInFlight: Int = 256, health: LedgerHealth.Thresholds = .init(),
            entitlementCacheUsers: Int = EntitlementRowCache.defaultCapacity
        ) {
            self.entitlementCacheUsers = entitlementCacheUsers
            self.host = host
            self.port = port
            self.api = api
            self.idleTimeout = idleTimeout
            self.maximumRequestsInFlight = maximumRequestsInFlight
            self.health = health
        }
    }

    let configuration: Configuration
    let client: DatabasePool
    let verifier: any ReceiptVerifier
    let secrets: SecretSealer?
    /// When given (and run as a service), requests are refused at once while the database is down.
    let monitor: DatabaseMonitor?
    /// When given (and run as a service), API keys and projection positions are kept in memory.
    let changes: ChangeFeed?
    let logger: Logger

    /// - Parameters:
    ///   - secrets: opens the apps' sealed App Store shared secrets; nil when no key is configured.
    ///   - monitor: when given (and run as a service), requests are refused at once while the database is down.
    ///   - changes: when given (and run as a service), API keys and projection positions are kept in
    ///     memory, true to the database by its announcements: a read costs one query.
    public init(
        configuration: Configuration, client: DatabasePool, verifier: any ReceiptVerifier, secrets: SecretSealer? = nil,
        monitor: DatabaseMonitor? = nil, changes: ChangeFeed? = nil, logger: Logger
    ) {
        self.configuration = configuration
        self.client = client
        self.verifier = verifier
        self.secrets = secrets
        self.monitor = monitor
        self.changes = changes
        self.logger = logger
    }

    /// Every route, behind the request-id, metrics, error and request-limit middleware.
    public func router() -> Router<LedgerRequestContext> {
        let registry = LedgerMetrics.bootstrap()
        // HEAD answers as GET does, without the body (a load balancer's or a monitor's check).
        let router = Router(context: LedgerRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.middlewares.add(RequestIDMiddleware())
        router.middlewares.add(MetricsMiddleware())
        router.middlewares.add(ErrorMiddleware())
        router.middlewares.add(RequestLimitMiddleware(limit: configuration.maximumRequestsInFlight))
        if let monitor { router.middlewares.add(DatabaseGateMiddleware(monitor: monitor)) }
        HealthController(client: client, thresholds: configuration.health, monitor: monitor, logger: logger).addRoutes(to: router)
        OpenAPIController().addRoutes(to: router)
        FinancePageController().addRoutes(to: router)
        MetricsController(registry: registry).addRoutes(to: router)
        LedgerAPI(client: client, verifier: verifier, configuration: configuration.api, secrets: secrets, changes: changes, logger: logger)
            .addRoutes(to: router)
        return router
    }

    /// The Hummingbird application; `services` run in its service group (the Postgres client first).
    public func application(
        services: [any Service],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(),
            server: .http1(configuration: .init(
                additionalChannelHandlers: [ConnectionCloseHandler.Installer()],
                idleTimeout: TimeAmount(configuration.idleTimeout)
            )),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "purchase-ledger"),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}
