import AppStore
import Hummingbird
import LedgerApplication
import Logging
import NIOCore
import ServiceLifecycle

/// The ledger's HTTP server: its routes over the ledger's services, as a service of the caller's group.
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
        /// before any work. Health, metrics and the OpenAPI document are not counted, nor the
        /// notifications webhook, which has its own budget.
        public var maximumRequestsInFlight: Int
        /// Notifications (`POST /v1/apps/{bundleId}/notifications`, keyless, reachable by anyone)
        /// answered at once, apart from the keyed API's budget: no amount of strangers' traffic
        /// there delays a keyed request. Beyond it, 503 at once (Apple tries again).
        public var maximumWebhooksInFlight: Int
        /// When `/health` calls a projection stalled and a transaction long.
        public var health: LedgerHealth.Thresholds
        /// Who may read `/metrics` on this listener: the bearer of the operator's metrics token
        /// (nil: nobody here; the metrics have a listener of their own, or none).
        public var metricsToken: String?

        public init(
            host: String = "127.0.0.1", port: Int = 8080, api: LedgerAPI.Configuration = .init(),
            idleTimeout: Duration = .seconds(30), maximumRequestsInFlight: Int = 256, maximumWebhooksInFlight: Int = 32,
            health: LedgerHealth.Thresholds = .init(), metricsToken: String? = nil
        ) {
            self.host = host
            self.port = port
            self.api = api
            self.idleTimeout = idleTimeout
            self.maximumRequestsInFlight = maximumRequestsInFlight
            self.maximumWebhooksInFlight = maximumWebhooksInFlight
            self.health = health
            self.metricsToken = metricsToken
        }
    }

    let configuration: Configuration
    let services: LedgerServices
    let logger: Logger

    public init(configuration: Configuration, services: LedgerServices, logger: Logger) {
        self.configuration = configuration
        self.services = services
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
        router.middlewares.add(RequestLimitMiddleware(limit: configuration.maximumRequestsInFlight, webhookLimit: configuration.maximumWebhooksInFlight))
        router.middlewares.add(DatabaseGateMiddleware(monitor: services.availability))
        HealthController(check: services.health, thresholds: configuration.health, availability: services.availability).addRoutes(to: router)
        OpenAPIController().addRoutes(to: router)
        FinancePageController().addRoutes(to: router)
        MetricsController(registry: registry, access: .token(configuration.metricsToken)).addRoutes(to: router)
        LedgerAPI(services: services, configuration: configuration.api).addRoutes(to: router)
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
            services: services + self.services.background,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}

extension LedgerServer {
    /// `/metrics` alone, open to whoever reaches `host:port`: for a scraper on a private network,
    /// apart from the API's listener, which strangers reach.
    public static func metricsApplication(host: String, port: Int, logger: Logger,
                                          onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router()
        MetricsController(registry: LedgerMetrics.bootstrap(), access: .open).addRoutes(to: router)
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "purchase-ledger-metrics"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}
