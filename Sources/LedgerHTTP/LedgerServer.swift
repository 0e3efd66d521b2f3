import Hummingbird
import LedgerStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// The ledger's HTTP server: its routes over the store, as a service of the caller's group.
public struct LedgerServer: Sendable {
    /// Where the server listens.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int

        public init(host: String = "127.0.0.1", port: Int = 8080) {
            self.host = host
            self.port = port
        }
    }

    let configuration: Configuration
    let store: PostgresEventStore
    let logger: Logger

    public init(configuration: Configuration, store: PostgresEventStore, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.logger = logger
    }

    /// The Hummingbird application; `services` run in its service group (the Postgres client first).
    public func application(
        services: [any Service],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router()
        router.middlewares.add(LogRequestsMiddleware(.debug))
        HealthController(store: store).addRoutes(to: router)
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "purchase-ledger"),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}
