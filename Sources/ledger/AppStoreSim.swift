import AppStore
import AppStoreSimulator
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import Logging
import ServiceLifecycle
import UnixSignals

struct AppStoreSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-sim",
        abstract: "Run a local App Store that speaks verifyReceipt, signs StoreKit 2 transactions and sends notifications, for trying the ledger without Apple.",
        discussion: """
            Point the ledger at it: LEDGER_APPSTORE_PRODUCTION_URL=http://HOST:PORT/production/verifyReceipt and LEDGER_APPSTORE_SANDBOX_URL=http://HOST:PORT/sandbox/verifyReceipt. Those two paths stand for Apple's two services: a receipt sent to the other environment's path answers 21007 or 21008, as Apple does, so the ledger records it in the right environment. Everything is in memory and lost when it stops.

            Receipts are signed: a changed receipt, or one from another simulator (another --signing-key), answers 21003. Receipts with an auto-renewable need the app's shared secret as "password" (else 21004). A sandbox simulator answers 21008 to production receipts, a production one 21007 to sandbox receipts.

            Auto-renewables renew on the simulator's clock. In the sandbox a period lasts P7D 3 min, P1M 5, P2M 10, P3M 15, P6M 30, P1Y 60, and renewals stop after 6; in production periods are calendar periods. The clock starts at the real time; advance it to see renewals and expiry.

            StoreKit 2: the simulator makes a test root, intermediate and leaf at start and signs transactions, renewal info and App Store Server Notifications V2 with them, in Apple's shapes. --root-out FILE writes the root (also GET /admin/root.pem); start the ledger with --trust-simulator-root FILE to accept them (Apple's root stays the only one otherwise). Give an app a notificationURL (the ledger's http://HOST:PORT/v1/apps/{bundleId}/notifications) and the simulator posts {"signedPayload"} there on purchases (SUBSCRIBED, ONE_TIME_CHARGE), renewals on its clock (DID_RENEW), plan changes, refunds (REFUND; REVOKE to family members), billing failures (DID_FAIL_TO_RENEW) and auto-renew changes, trying again after 1, 2, 4, 8 and 16 seconds until it gets a 200.

            Admin API (JSON bodies, ISO 8601 dates):
              PUT    /admin/apps/{bundleId}
                       {"sharedSecret": "...", "notificationURL": "http://..."}
                       optional: a random secret is made; "" turns
                       notifications off
              GET    /admin/apps/{bundleId}
              PUT    /admin/apps/{bundleId}/products/{productId}
                       {"type": consumable | non_consumable | auto_renewable |
                                non_renewing | free_subscription,
                        "duration": P7D | P1M | P2M | P3M | P6M | P1Y,
                        "group", "level": 1 (highest), "familyShareable": true,
                        "introOffer": {"kind": free_trial | pay_as_you_go |
                                       pay_up_front, "periods": N},
                        "price": "0.99", "currency": "USD"}  (price goes into
                       signed transactions only)
              GET    /admin/apps/{bundleId}/products
              POST   /admin/users
                       {"userId": "alice"}  optional: user-1, user-2, ...
              POST   /admin/purchases
                       {"userId", "bundleId", "productId", "quantity": 1}
                       answers the transaction, "receipt" (app receipt),
                       "transactionReceipt" (old per-transaction receipt) and
                       "signedTransaction" (StoreKit 2's JWS)
                       another product of a subscribed group: an upgrade
                       (at once) or a downgrade/crossgrade (202, at renewal)
              POST   /admin/restores
                       {"userId", "bundleId"}  a StoreKit restore: new
                       transaction ids (auto-renewables: sharing each
                       period's web_order_line_item_id)
              POST   /admin/family
                       {"organizerUserId", "memberUserId"}  Family Sharing
              POST   /admin/transactions/{transactionId}/cancel
                       {"reason": 0 | 1}  a simulated production refund
                       (Apple's sandbox never sends cancellation_date)
              POST   /admin/transactions/{transactionId}/finish
                       the app finishes it: a finished consumable leaves
                       later receipts
              GET    /admin/subscriptions/{originalTransactionId}
              POST   /admin/subscriptions/{originalTransactionId}/billing
                       {"failing": true, "gracePeriodDays": 16}  billing
                       retry (and grace period) in pending_renewal_info
              POST   /admin/subscriptions/{originalTransactionId}/auto-renew
                       {"enabled": false}
              GET    /admin/users/{userId}/apps/{bundleId}
                       transactions so far, a fresh app receipt and
                       "signedTransactions"
              GET    /admin/notifications
                       every notification: type, transaction, tries, last
                       status, delivered
              GET    /admin/root.pem   the test root (PEM)
              GET    /admin/clock
              POST   /admin/clock/advance
                       {"minutes": 5} or {"seconds": 300}
              PUT    /admin/faults
                       {"failNext": 3, "failStatus": 21005,
                        "isRetryable": false, "latencyMilliseconds": 0,
                        "trickleMilliseconds": 0}  (body sent slowly over that time)
              GET    /admin/faults
              DELETE /admin/faults
              POST   /production/verifyReceipt, /sandbox/verifyReceipt
                       {"receipt-data", "password", "exclude-old-transactions"}
              POST   /verifyReceipt   (this simulator's own environment)

            It also plays Apple's App Store Server API (transaction and
            notification history, subscription statuses, consumption answers,
            order lookup, test notifications) for the ledger's
            LEDGER_APPSTORE_SERVER_API_*_URL: POST /admin/apps/{bundleId}/api-keys
            issues a key for `ledger apps appstore-key`. Every route, with the
            refund requests, dropped notifications and 429s it can be told to
            make: docs/app-store.md, "The App Store simulator".
            """
    )

    @Option(help: "Address to listen on; keep it on loopback.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0: any free port).")
    var port = 8090

    @Option(help: "Which App Store to be: sandbox or production.")
    var environment = "sandbox"

    @Option(help: ArgumentHelp("Text the receipt-signing key is derived from, so that receipts survive a restart (default: random per run).", valueName: "text"))
    var signingKey: String?

    @Option(help: ArgumentHelp("Write the test root that signs StoreKit 2 transactions and notifications to this file (PEM), for ledger serve --trust-simulator-root.", valueName: "file"))
    var rootOut: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: $LEDGER_LOG_LEVEL or info).")
    var logLevel: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("port \(port) is not a number from 0 to 65535") }
        guard StoreEnvironment(rawValue: environment) != nil else {
            throw ValidationError("environment '\(environment)' is not sandbox or production")
        }
    }

    func run() async throws {
        let text = logLevel ?? ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError("log level '\(text)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        LoggingBootstrap.once(level: level)
        var logger = Logger(label: "appstore-sim")
        logger.logLevel = level

        let host = self.host
        let environment = StoreEnvironment(rawValue: environment) ?? .sandbox
        let simulator = try AppStoreSimulator(
            configuration: .init(host: host, port: port, environment: environment, signingKey: signingKey),
            logger: logger
        ) { boundPort in
            Self.printWelcome(base: "http://\(host):\(boundPort)", environment: environment)
        }
        if let rootOut {
            do {
                try simulator.signedPayloads.authority.rootPEM().write(toFile: rootOut, atomically: true, encoding: .utf8)
            } catch {
                throw CommandFailure(message: "cannot write the test root to '\(rootOut)': \(error.localizedDescription)")
            }
            Output.line("test root written to \(rootOut): start the ledger with --trust-simulator-root \(rootOut)")
        }
        let group = ServiceGroup(configuration: .init(
            services: [simulator],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await group.run()
    }

    private static func printWelcome(base: String, environment: StoreEnvironment) {
        Output.line("""
            App Store simulator (\(environment)) listening on \(base)
            verifyReceipt URLs: \(base)/production/verifyReceipt and \(base)/sandbox/verifyReceipt
              LEDGER_APPSTORE_PRODUCTION_URL=\(base)/production/verifyReceipt LEDGER_APPSTORE_SANDBOX_URL=\(base)/sandbox/verifyReceipt swift run ledger serve

            Try a purchase:
              curl -s -X PUT \(base)/admin/apps/com.example.app/products/com.example.app.coins -d '{"type":"consumable"}'
              curl -s -X POST \(base)/admin/users -d '{"userId":"alice"}'
              curl -s -X POST \(base)/admin/purchases -d '{"userId":"alice","bundleId":"com.example.app","productId":"com.example.app.coins","quantity":2}'
            then verify the "receipt" it returns:
              curl -s -X POST \(base)/\(environment)/verifyReceipt -d '{"receipt-data":"RECEIPT"}'
            """)
    }
}
