import AppStore
import Hummingbird
import LedgerStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// The ledger's HTTP server: its routes over the store, as a service of the caller's group.
public struct LedgerServer: Sendable {
    /// Where the server listens and how the API behaves.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var api: LedgerAPI.Configuration
        /// When `/health` calls a projection stalled and a transaction long.
        public var health: LedgerHealth.Thresholds

        public init(
            host: String = "127.0.0.1", port: Int = 8080, api: LedgerAPI.Configuration = .init(),
            health: LedgerHealth.Thresholds = .init()
        ) {
            self.host = host
            self.port = port
            self.api = api
            self.health = health
        }
    }

    let configuration: Configuration
    let client: PostgresClient
    let verifier: any ReceiptVerifier
    let logger: Logger

    public init(configuration: Configuration, client: PostgresClient, verifier: any ReceiptVerifier, logger: Logger) {
        self.configuration = configuration
        self.client = client
        self.verifier = verifier
        self.logger = logger
    }

    /// Every route, behind the request-id and error middleware.
    public func router() -> Router<LedgerRequestContext> {
        let registry = LedgerMetrics.bootstrap()
        let router = Router(context: LedgerRequestContext.self)
        router.middlewares.add(RequestIDMiddleware())
        router.middlewares.add(MetricsMiddleware())
        router.middlewares.add(ErrorMiddleware())
        HealthController(client: client, thresholds: configuration.health, logger: logger).addRoutes(to: router)
        OpenAPIController().addRoutes(to: router)
        MetricsController(registry: registry).addRoutes(to: router)
        LedgerAPI(client: client, verifier: verifier, configuration: configuration.api, logger: logger).addRoutes(to: router)
        return router
    }

    /// The Hummingbird application; `services` run in its service group (the Postgres client first).
    public func application(
        services: [any Service],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "purchase-ledger"),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}
