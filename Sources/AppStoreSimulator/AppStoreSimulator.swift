import AppStore
import Crypto
import Foundation
import Hummingbird
import LedgerDomain
import Logging
import ServiceLifecycle

/// A local App Store that speaks `verifyReceipt`, so the ledger can be exercised end to end without Apple.
///
/// It sells products of the catalog's types to test users, issues signed receipts (both the iOS 7
/// app receipt and the old per-transaction receipt), renews auto-renewables on its own clock (the
/// sandbox's accelerated schedule, stopping after six renewals), changes plans within subscription
/// groups, gives intro offers, shares purchases with a family, fails billing on request, lets
/// support cancel transactions, and answers the statuses the real service does: 21000, 21002,
/// 21003 (not signed by this simulator, or changed), 21004 (shared secret), 21006, 21007/21008 (the
/// other environment's receipt) and, on request, 21005 or slowness. Everything is in memory and
/// lost at exit.
///
/// Routes (JSON):
/// - `POST /verifyReceipt` — the App Store protocol.
/// - `PUT /admin/apps/{bundleId}` `{"sharedSecret"}`; `GET /admin/apps/{bundleId}`.
/// - `PUT /admin/apps/{bundleId}/products/{productId}` `{"type", "duration"?, "group"?, "level"?,
///   "familyShareable"?, "introOffer"?: {"kind", "periods"}}`; `GET /admin/apps/{bundleId}/products`.
/// - `POST /admin/users` `{"userId"?}`; `POST /admin/family` `{"organizerUserId", "memberUserId"}`.
/// - `POST /admin/purchases` `{"userId", "bundleId", "productId", "quantity"?}` → transaction, plan
///   change and receipts (202 when a downgrade waits for the next renewal).
/// - `POST /admin/restores` `{"userId", "bundleId"}`.
/// - `POST /admin/transactions/{transactionId}/cancel` `{"reason"?}` — a simulated production refund.
/// - `POST /admin/transactions/{transactionId}/finish` — the app finishes it (consumables leave receipts).
/// - `GET /admin/subscriptions/{originalTransactionId}`; `POST …/billing` `{"failing", "gracePeriodDays"?}`;
///   `POST …/auto-renew` `{"enabled"}`.
/// - `GET /admin/users/{userId}/apps/{bundleId}` — transactions and a fresh app receipt.
/// - `GET /admin/clock`; `POST /admin/clock/advance` `{"seconds"|"minutes"}`.
/// - `GET /admin/root.pem`; `GET /admin/notifications`; `POST /admin/apps/{bundleId}/api-keys`.
/// - `POST /admin/transactions/{transactionId}/refund-request` `{"reason"?}` — the customer asks Apple
///   for a refund: a CONSUMPTION_REQUEST notification.
/// - `PUT /admin/apps/{bundleId}/notifications/dropped` `{"dropped"}` — every delivery of the app's
///   notifications fails (a gap); `POST /admin/apps/{bundleId}/notifications/synthetic`
///   `{"count", "productId"?}`; `GET /admin/consumption` — consumption information received.
/// - `GET /inApps/v2/history/{transactionId}` — the App Store Server API (a bearer JWT by an API key),
///   and beside it Get Notification History, Get All Subscription Statuses, Send Consumption
///   Information (V2), Look Up Order ID, Request a Test Notification and its status (also under
///   `/production/` and `/sandbox/`).
/// - `GET`/`PUT`/`DELETE /admin/faults` `{"failNext", "failStatus", "isRetryable", "latencyMilliseconds", "trickleMilliseconds"}`.
public struct AppStoreSimulator: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// 0 picks a free port; `onServerRunning` is told which.
        public var port: Int
        public var environment: StoreEnvironment
        /// Text the receipt-signing key is derived from; `nil` for a random key per run.
        public var signingKey: String?
        /// Set by benchmarks to learn the server's own handling time per receipt.
        public var timing: SimulatorServerTiming?
        /// The test root, intermediate and leaf that sign StoreKit 2 transactions and notifications;
        /// nil makes new ones at start. A ledger trusts them only when told (`--trust-simulator-root`).
        public var authority: SimulatorCertificateAuthority?
        /// The pauses before each new try of a notification the server did not answer 200 (Apple
        /// makes five more tries, hours apart; the simulator seconds apart).
        public var notificationRetryDelays: [Duration]

        public init(
            host: String = "127.0.0.1",
            port: Int = 8090,
            environment: StoreEnvironment = .sandbox,
            signingKey: String? = nil,
            timing: SimulatorServerTiming? = nil,
            authority: SimulatorCertificateAuthority? = nil,
            notificationRetryDelays: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16)]
        ) {
            self.host = host
            self.port = port
            self.environment = environment
            self.signingKey = signingKey
            self.timing = timing
            self.authority = authority
            self.notificationRetryDelays = notificationRetryDelays
        }
    }

    let configuration: Configuration
    let logger: Logger
    let store: SimulatorStore
    let signer: SimulatorReceiptSigner
    /// Signs StoreKit 2 transactions, renewal info and notifications.
    public let signedPayloads: SimulatorSignedPayloads
    let notifier: SimulatorNotifier
    let onServerRunning: @Sendable (Int) async -> Void

    /// - Parameter onServerRunning: called with the bound port once the server listens.
    public init(configuration: Configuration, logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        self.configuration = configuration
        self.logger = logger
        self.store = SimulatorStore(environment: configuration.environment)
        self.signer = SimulatorReceiptSigner(keyText: configuration.signingKey)
        self.signedPayloads = SimulatorSignedPayloads(authority: try configuration.authority ?? SimulatorCertificateAuthority())
        self.notifier = SimulatorNotifier(signer: signedPayloads, environment: configuration.environment,
                                          retryDelays: configuration.notificationRetryDelays, logger: logger)
        self.onServerRunning = onServerRunning
    }

    /// Serves until shut down, sending notifications meanwhile.
    public func run() async throws {
        let notifier = self.notifier
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await notifier.run() }
            do {
                try await application().run()
            } catch {
                await notifier.stop()
                group.cancelAll()
                throw error
            }
            await notifier.stop()
            group.cancelAll()
        }
    }

    func application() -> some ApplicationProtocol {
        let router = Router()
        router.middlewares.add(LogRequestsMiddleware(.debug))
        router.middlewares.add(NoticeMiddleware(store: store, notifier: notifier))
        addVerifyRoute(to: router)
        addAdminRoutes(to: router)
        addServerAPIRoutes(to: router)
        addSalesReportRoutes(to: router)
        addServerAPICallRoutes(to: router)
        let onServerRunning = self.onServerRunning
        return Application(
            router: router,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "appstore-sim"
            ),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }

    // MARK: verifyReceipt

    private func addVerifyRoute(to router: Router<some RequestContext>) {
        let store = self.store
        let signer = self.signer
        let environment = configuration.environment
        let timing = configuration.timing
        let renderer = SimulatorResponseRenderer(environment: environment, signer: signer)
        let logger = self.logger
        // `/verifyReceipt` is this simulator's own App Store; `/production/verifyReceipt` and
        // `/sandbox/verifyReceipt` stand for Apple's two, so one simulator can sit behind both of the
        // ledger's URLs and still answer a receipt sent to the wrong one with 21007 or 21008.
        for (path, asked) in [("/verifyReceipt", environment), ("/production/verifyReceipt", .production), ("/sandbox/verifyReceipt", .sandbox)]
            as [(String, StoreEnvironment)] {
            router.post(RouterPath(path)) { request, context -> Response in
                let fault = await store.takeFault()
                if fault.latencyMilliseconds > 0 {
                    try await Task.sleep(for: .milliseconds(fault.latencyMilliseconds))
                }
                if let status = fault.status {
                    logger.debug("verifyReceipt fault injected", metadata: ["appstore.status": "\(status)"])
                    return try Self.verifyResponse(
                        SimulatorResponseRenderer.status(status, isRetryable: fault.isRetryable), trickle: fault.trickleMilliseconds
                    )
                }
                let started = ContinuousClock.now
                let bytes = try await request.body.collect(upTo: context.maxUploadSize)
                guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] else {
                    return try Self.verifyResponse(SimulatorResponseRenderer.status(21000))
                }
                guard let receiptData = object["receipt-data"] as? String else {
                    return try Self.verifyResponse(SimulatorResponseRenderer.status(21002))
                }
                let answer: [String: Any]
                switch signer.open(receiptData) {
                case .failure(.malformed):
                    answer = SimulatorResponseRenderer.status(21002)
                case .failure(.notAuthentic):
                    answer = SimulatorResponseRenderer.status(21003)
                case .success(let payload) where payload.environment != asked:
                    answer = SimulatorResponseRenderer.status(payload.environment == .sandbox ? 21007 : 21008)
                case .success(let payload):
                    if let view = await store.verificationView(for: payload) {
                        answer = renderer.answer(
                            payload: payload,
                            view: view,
                            password: object["password"] as? String,
                            excludeOldTransactions: LenientJSON(object["exclude-old-transactions"]).bool ?? false
                        )
                    } else {
                        answer = SimulatorResponseRenderer.status(21003)
                    }
                }
                let response = try Self.verifyResponse(answer, trickle: fault.trickleMilliseconds)
                let elapsed = ContinuousClock.now - started
                timing?.record(receiptSHA256: AppStoreReceiptVerifier.sha256Hex(receiptData), elapsed)
                logger.debug("verifyReceipt answered", metadata: ["appstore.status": "\(answer["status"] ?? "?")"])
                return response
            }
        }
    }

    /// `verifyReceipt` answers every status with HTTP 200, as the real service does. With `trickle`
    /// (milliseconds), the body goes out in up to 20 pieces spread over that time, after the head.
    static func verifyResponse(_ body: [String: Any], trickle: Int = 0) throws -> Response {
        let data = try JSONSerialization.data(withJSONObject: body, options: [.withoutEscapingSlashes])
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        guard trickle > 0 else {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        let pieces = max(1, min(20, data.count))
        let pieceSize = (data.count + pieces - 1) / pieces
        let pause = Duration.milliseconds(trickle) / pieces
        return Response(status: .ok, headers: headers, body: .init(contentLength: data.count) { writer in
            var offset = 0
            while offset < data.count {
                try await Task.sleep(for: pause)
                let end = min(data.count, offset + pieceSize)
                try await writer.write(ByteBuffer(bytes: data[offset..<end]))
                offset = end
            }
            try await writer.finish(nil)
        })
    }
}

/// After every request: what it made happen that Apple would notify the app's server of
/// (a purchase, a renewal the clock brought, a refund) is signed and queued for sending.
struct NoticeMiddleware<Context: RequestContext>: RouterMiddleware {
    let store: SimulatorStore
    let notifier: SimulatorNotifier

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            await notifier.enqueue(await store.takeNotices())
            return response
        } catch {
            await notifier.enqueue(await store.takeNotices())
            throw error
        }
    }
}
