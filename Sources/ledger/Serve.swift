import ArgumentParser
import Foundation
import LedgerHTTP
import LedgerStore
import Logging
import PostgresNIO
import ServiceLifecycle
import UnixSignals

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the ledger's HTTP server (migrating the database first).",
        discussion: """
            With nothing configured it starts the managed local PostgreSQL under .ledger/, applies the
            migrations and listens on 127.0.0.1:8080. Stop it with Ctrl-C or SIGTERM: requests in flight finish first.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(help: "Address to listen on (default: $LEDGER_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on (default: $LEDGER_PORT or 8080).")
    var port: Int?

    func run() async throws {
        let logger = try options.makeLogger()
        let environment = ProcessInfo.processInfo.environment
        let host = host ?? environment["LEDGER_HOST"] ?? "127.0.0.1"
        let portText = port.map(String.init) ?? environment["LEDGER_PORT"] ?? "8080"
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw CommandFailure(message: "port '\(portText)' (from --port or LEDGER_PORT) is not a number from 0 to 65535")
        }
        let settings = try await options.databaseSettings(logger: logger)
        logger.info("configuration", metadata: [
            "ledger.database": "\(settings.url())",
            "ledger.listen": "\(host):\(port)",
        ])
        let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            try await Migrator.bundled().migrate(client, logger: logger)
        }
        logger.info("database ready", metadata: [
            "ledger.migrations.applied": "\(report.applied.count)",
            "ledger.migrations.present": "\(report.alreadyApplied)",
        ])

        let client = PostgresClient(configuration: settings.clientConfiguration, backgroundLogger: LedgerDatabase.backgroundLogger(logger))
        let store = PostgresEventStore(client: client, logger: logger)
        let server = LedgerServer(configuration: .init(host: host, port: port), store: store, logger: logger)
        let projections = ProjectionRunner(
            client: client, listenConfiguration: settings.connectionConfiguration, logger: logger
        )
        let application = server.application(services: [client, projections]) { boundPort in
            logger.info("ledger serving", metadata: ["ledger.url": "http://\(host):\(boundPort)"])
        }
        let group = ServiceGroup(configuration: .init(
            services: [application],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await group.run()
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
