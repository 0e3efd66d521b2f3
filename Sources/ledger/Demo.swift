import AppStore
import AppStoreSimulator
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDemo
import LedgerDomain
import LedgerRuntime
import LedgerStore
import LocalPostgres
import Logging
import ServiceLifecycle
import UnixSignals

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tell the ledger's stories through its HTTP API, against a local App Store simulator.",
        discussion: """
            Starts the App Store simulator (sandbox) and the ledger's server on free loopback ports, over the managed local PostgreSQL (or --database-url / LEDGER_DATABASE_URL). Each run registers a new app, com.example.demo.<time>, with the simulator's shared secret and a key with every scope, so the demo can be run again and again. Then, through HTTP only, as an app's server would:

              consumable      5 coins bought, 3 used, 3 more refused
                              (409 insufficient_balance, balance 2)
              non-consumable  bought, bought again (recorded as a restore:
                              one purchase in the audit), restored to a tablet
              non-renewing    a one-month pass bought twice (periods stacked
                              back to back), restored to a new laptop
              refund          Apple refunds a purchase; the next receipt
                              revokes it and the entitlement goes
              auto-renewable  renews on the sandbox clock (a month lasts
                              5 minutes), then lapses after the 6th renewal
              restore         a subscription restored to a new tablet: the
                              App Store lists its periods again under new
                              ids; the audit keeps one purchase, one renewal
              replay          on a scratch database: audit_trail built by a
                              fold with a bug (restored periods paid twice),
                              the rebuild's dry run naming the rows the fix
                              changes, then the rebuild switching over

            Each step prints what was sent and what was answered; each story ends with the user's entitlements, balances and periods. Then it prints where to look next (the audit CSV, projections status, audit export) and stops, unless --keep-running. Takes a few seconds.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Keep the ledger and the simulator running after the stories, until Ctrl-C, to try the printed commands.")
    var keepRunning = false

    func run() async throws {
        var options = self.options
        if options.logLevel == nil, ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] == nil {
            options.logLevel = "warning"  // the story goes to standard output; keep standard error quiet
        }
        let logger = try options.makeLogger()
        let roles = try await options.databaseRoles(logger: logger)
        let secrets: SecretSealer
        if let configured = try options.secretSealer() {
            secrets = configured
        } else {
            secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "a key of this demo run only")
            logger.notice("no LEDGER_SECRET_KEY: the demo app's shared secret is sealed with a key of this run only; a later `ledger serve` cannot verify its receipts")
        }
        let bundleId = "com.example.demo.\(Int(Date().timeIntervalSince1970))"
        let sharedSecret = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()

        let simulatorForLedger = ServerPort()
        let simulatorForStories = ServerPort()
        let ledgerPort = ServerPort()
        let simulator = try AppStoreSimulator(
            configuration: .init(host: "127.0.0.1", port: 0, environment: .sandbox), logger: logger
        ) { port in
            simulatorForLedger.report(port)
            simulatorForStories.report(port)
        }
        let ledger = DemoLedgerService(
            roles: roles, secrets: secrets, simulatorPort: simulatorForLedger, ledgerPort: ledgerPort,
            signedPayloads: SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, simulator.signedPayloads.authority.root]),
            logger: logger
        )
        // The app's own server, taking the ledger's webhooks in the following story.
        let appServer = DemoAppServer()
        let appServerPort = ServerPort()
        let appServerApplication = appServer.application(logger: logger) { base in
            appServerPort.report(Int(base.split(separator: ":").last ?? "") ?? 0)
        }
        let stories = DemoStoriesService(
            roles: roles, secrets: secrets, bundleId: bundleId, sharedSecret: sharedSecret, simulatorPort: simulatorForStories,
            ledgerPort: ledgerPort, appServer: appServer, appServerPort: appServerPort, keepRunning: keepRunning, logger: logger
        )
        let group = ServiceGroup(configuration: .init(
            services: [
                .init(service: simulator),
                .init(service: appServerApplication),
                .init(service: ledger),
                .init(service: stories, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await group.run()
    }
}
