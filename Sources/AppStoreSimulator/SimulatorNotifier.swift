import AppStore
import AsyncHTTPClient
import Foundation
import LedgerDomain
import Logging
import NIOCore
import NIOHTTP1

/// Sends App Store Server Notifications V2 as Apple does: each one signed, POSTed as
/// `{"signedPayload"}` to the app's notification URL, and sent again with growing pauses until
/// the server answers 200 (Apple waits hours between tries; the simulator seconds), up to as many
/// tries as Apple makes. Every notification and its tries are listed at `GET /admin/notifications`.
actor SimulatorNotifier {
    /// One notification and what became of it.
    struct Delivery: Encodable, Sendable {
        let notificationUUID: String
        let notificationType: String
        let subtype: String?
        let bundleId: String
        /// Nil for a notification about the app, not a transaction (an external purchase token, a
        /// consent rescinded, a test).
        let transactionId: String?
        let originalTransactionId: String?
        let signedDate: Date
        let url: String
        var attempts: Int = 0
        var lastStatus: Int?
        var lastError: String?
        /// The server's last answer (its first 4 KiB).
        var answer: String?
        var delivered = false
        let signedPayload: String
        /// Apple's record of the tries, as Get Notification History lists them: when, and
        /// `SUCCESS`, `NO_RESPONSE`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, …
        var sendAttempts: [SendAttempt] = []
    }

    struct SendAttempt: Encodable, Sendable {
        let attemptDate: Int64
        let sendAttemptResult: String
    }

    private let signer: SimulatorSignedPayloads
    private let environment: StoreEnvironment
    /// The pauses before the second, third, … try.
    private let retryDelays: [Duration]
    private let logger: Logger
    private var deliveries: [Delivery] = []
    private var index: [String: Int] = [:]
    /// Apps whose notifications are lost on the way (a ledger down, a broken proxy): every try fails.
    private var dropped: Set<String> = []
    private let queue: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation

    init(signer: SimulatorSignedPayloads, environment: StoreEnvironment, retryDelays: [Duration], logger: Logger) {
        self.signer = signer
        self.environment = environment
        self.retryDelays = retryDelays
        self.logger = logger
        (queue, continuation) = AsyncStream.makeStream(of: String.self)
    }

    /// Signs what the store noted and queues it for sending.
    func enqueue(_ notices: [SimulatorStore.Notice]) {
        for notice in notices {
            do {
                let delivery = try render(notice)
                index[delivery.notificationUUID] = deliveries.count
                deliveries.append(delivery)
                continuation.yield(delivery.notificationUUID)
            } catch {
                logger.error("could not sign a notification", metadata: ["appstore.type": "\(notice.type)", "appstore.error": "\(error)"])
            }
        }
    }

    func all() -> [Delivery] { deliveries }

    func delivery(_ uuid: String) -> Delivery? { index[uuid].map { deliveries[$0] } }

    /// Get Notification History's records of the app: signed in `[from, to)`, in the order sent.
    func history(bundleId: String, from: Date, to: Date) -> [Delivery] {
        deliveries.filter { $0.bundleId == bundleId && $0.signedDate >= from && $0.signedDate < to }
    }

    /// Makes every try of the app's notifications fail (`true`), or lets them through again.
    func setDropped(_ bundleId: String, _ drop: Bool) {
        if drop { dropped.insert(bundleId) } else { dropped.remove(bundleId) }
    }

    func isDropped(_ bundleId: String) -> Bool { dropped.contains(bundleId) }

    /// `count` signed notifications about made-up one-time charges of the app, queued for sending
    /// as any other (for the benchmarks of a history walk: volume without a purchase each).
    func enqueueSynthetic(count: Int, bundleId: String, url: String, productId: String, at now: Date) throws -> Int {
        let appAppleId = Int64(SimulatorResponseRenderer.stableNumber(bundleId) % 10_000_000_000)
        for number in 0..<count {
            let uuid = UUID().uuidString.lowercased()
            let transactionId = "9\(Int64(now.timeIntervalSince1970 * 1000) % 1_000_000_000_000)\(String(format: "%06d", number))"
            let transaction = try signer.sign(SimulatorSignedPayloads.transaction(
                transactionId: transactionId, bundleId: bundleId, productId: productId, type: .consumable, purchaseDate: now,
                quantity: 1, price: 990, currency: "USD", environment: environment, signedDate: Date()
            ))
            let payload = SimulatorSignedPayloads.notification(
                type: "ONE_TIME_CHARGE", uuid: uuid, bundleId: bundleId, appAppleId: appAppleId, environment: environment,
                signedTransactionInfo: transaction, signedDate: Date()
            )
            let delivery = Delivery(notificationUUID: uuid, notificationType: "ONE_TIME_CHARGE", subtype: nil, bundleId: bundleId,
                                    transactionId: transactionId, originalTransactionId: transactionId, signedDate: Date(), url: url,
                                    signedPayload: try signer.sign(payload))
            index[uuid] = deliveries.count
            deliveries.append(delivery)
            continuation.yield(uuid)
        }
        return count
    }

    /// Signs and queues a notification about the app rather than a transaction, in the shape
    /// Apple gives each type: EXTERNAL_PURCHASE_TOKEN carries `externalPurchaseToken` (no
    /// environment: a sandbox token's id starts with `SANDBOX_`), RESCIND_CONSENT carries `appData`
    /// with a signed app transaction, TEST carries `data` without a transaction.
    func enqueueAppNotification(type: String, subtype: String?, bundleId: String, url: String, at now: Date) throws -> String {
        let uuid = UUID().uuidString.lowercased()
        let appAppleId = Int64(SimulatorResponseRenderer.stableNumber(bundleId) % 10_000_000_000)
        // Signed at the real time, as Apple signs; the token's and the app's dates follow the simulator's clock.
        var payload: [String: Any] = ["notificationType": type, "notificationUUID": uuid, "version": "2.0", "signedDate": Date().milliseconds]
        if let subtype { payload["subtype"] = subtype }
        switch type {
        case "EXTERNAL_PURCHASE_TOKEN":
            payload["externalPurchaseToken"] = [
                "externalPurchaseId": (environment == .sandbox ? "SANDBOX_" : "") + UUID().uuidString.lowercased(),
                "tokenCreationDate": now.milliseconds, "appAppleId": appAppleId, "bundleId": bundleId,
            ] as [String: Any]
        case "RESCIND_CONSENT":
            let appTransaction = try signer.sign([
                "receiptType": environment.responseValue, "appAppleId": appAppleId, "bundleId": bundleId, "applicationVersion": "1",
                "receiptCreationDate": now.milliseconds, "originalPurchaseDate": now.milliseconds, "originalApplicationVersion": "1",
                "appTransactionId": String(SimulatorResponseRenderer.stableNumber(uuid)), "originalPlatform": "iOS", "signedDate": Date().milliseconds,
            ])
            payload["appData"] = [
                "appAppleId": appAppleId, "bundleId": bundleId, "environment": environment.responseValue, "signedAppTransactionInfo": appTransaction,
            ] as [String: Any]
        default:
            payload["data"] = ["appAppleId": appAppleId, "bundleId": bundleId, "environment": environment.responseValue, "bundleVersion": "1"]
        }
        let delivery = Delivery(notificationUUID: uuid, notificationType: type, subtype: subtype, bundleId: bundleId, transactionId: nil,
                                originalTransactionId: nil, signedDate: now, url: url, signedPayload: try signer.sign(payload))
        index[uuid] = deliveries.count
        deliveries.append(delivery)
        continuation.yield(uuid)
        return uuid
    }

    /// Sends what is queued until cancelled; each notification on its own, so one server's retries
    /// never hold back another notification.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await uuid in queue {
                group.addTask { await self.deliver(uuid) }
            }
        }
    }

    func stop() {
        continuation.finish()
    }

    private func deliver(_ uuid: String) async {
        guard let first = index[uuid].map({ deliveries[$0] }) else { return }
        let url = first.url
        var body = ByteBuffer()
        body.writeBytes((try? JSONSerialization.data(withJSONObject: ["signedPayload": first.signedPayload])) ?? Data())
        for attempt in 0...retryDelays.count {
            if attempt > 0 {
                do { try await Task.sleep(for: retryDelays[attempt - 1]) } catch { return }
            }
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "App Store Server Notifications (simulator)")
            request.body = .bytes(body)
            var status: Int?
            var failure: String?
            var answer: String?
            if dropped.contains(first.bundleId) {
                failure = "dropped on the way (the simulator's switch for lost notifications)"
            } else {
                do {
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                    status = Int(response.status.code)
                    if let bytes = try? await response.body.collect(upTo: 1 << 20) {
                        answer = String(decoding: bytes.readableBytesView.prefix(4096), as: UTF8.self)
                    }
                } catch {
                    failure = "\(error)"
                }
            }
            let delivered = status == 200
            note(uuid, status: status, error: failure, answer: answer, delivered: delivered)
            if delivered { return }
            logger.debug("notification not taken; will try again", metadata: [
                "appstore.notification": "\(uuid)", "appstore.status": "\(status.map(String.init) ?? failure ?? "?")",
            ])
        }
        logger.warning("notification given up after every try", metadata: ["appstore.notification": "\(uuid)", "appstore.url": "\(url)"])
    }

    private func note(_ uuid: String, status: Int?, error: String?, answer: String?, delivered: Bool) {
        guard let position = index[uuid] else { return }
        deliveries[position].attempts += 1
        deliveries[position].lastStatus = status
        deliveries[position].lastError = error
        deliveries[position].answer = answer
        deliveries[position].delivered = delivered
        let result = delivered ? "SUCCESS" : status != nil ? "UNSUCCESSFUL_HTTP_RESPONSE_CODE" : "NO_RESPONSE"
        deliveries[position].sendAttempts.append(SendAttempt(attemptDate: Date().milliseconds, sendAttemptResult: result))
    }

    private func render(_ notice: SimulatorStore.Notice) throws -> Delivery {
        // Signed at the real time, as Apple signs, whenever the simulator's clock says it happened.
        let signedAt = Date()
        let transaction = try signer.sign(signer.fields(of: notice.transaction, product: notice.product, environment: environment, signedDate: signedAt))
        var renewalInfo: String?
        if notice.transaction.productType == .autoRenewable {
            renewalInfo = try signer.sign(signer.renewalFields(of: notice.transaction, subscription: notice.renewal, environment: environment,
                                                               signedDate: signedAt))
        }
        let uuid = UUID().uuidString.lowercased()
        let payload = SimulatorSignedPayloads.notification(
            type: notice.type, subtype: notice.subtype, uuid: uuid, bundleId: notice.transaction.bundleId,
            appAppleId: Int64(SimulatorResponseRenderer.stableNumber(notice.transaction.bundleId) % 10_000_000_000), environment: environment,
            signedTransactionInfo: transaction, signedRenewalInfo: renewalInfo, consumptionRequestReason: notice.consumptionRequestReason,
            signedDate: signedAt
        )
        return Delivery(
            notificationUUID: uuid, notificationType: notice.type, subtype: notice.subtype, bundleId: notice.transaction.bundleId,
            transactionId: notice.transaction.transactionId, originalTransactionId: notice.transaction.originalTransactionId,
            signedDate: signedAt, url: notice.notificationURL, signedPayload: try signer.sign(payload)
        )
    }
}

extension SimulatorSignedPayloads {
    /// A simulator transaction as StoreKit 2 shows it: Apple's `price` is the whole quantity's
    /// (three coins at 0.99 are 2970), a refund says how much it took back (`revocationType`,
    /// `revocationPercentage`), and an Advanced Commerce product carries `advancedCommerceInfo`.
    func fields(
        of transaction: SimulatorTransaction, product: SimulatedProduct?, environment: StoreEnvironment, signedDate: Date
    ) -> [String: Any] {
        let trial = transaction.isTrialPeriod
        let revoked = transaction.cancellationDate
        let local = product?.price(in: transaction.storefront)
        let unit = local.flatMap { SimulatedProduct.milliunits($0.price) }
        var fields = Self.transaction(
            transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId, bundleId: transaction.bundleId,
            productId: transaction.productId, type: transaction.productType, purchaseDate: transaction.purchaseDate,
            originalPurchaseDate: transaction.originalPurchaseDate, expiresDate: transaction.expiresDate, quantity: transaction.quantity,
            price: unit.map { trial ? 0 : $0 * Int64(transaction.quantity) }, currency: unit.map { _ in local?.currency ?? "USD" },
            environment: environment,
            webOrderLineItemId: transaction.webOrderLineItemId, subscriptionGroupIdentifier: transaction.subscriptionGroupIdentifier,
            revocationDate: revoked, revocationReason: revoked == nil || transaction.isUpgraded ? nil : (transaction.cancellationReason ?? 0),
            isUpgraded: transaction.isUpgraded, offerType: trial || transaction.isInIntroOfferPeriod ? 1 : nil,
            offerDiscountType: trial ? "FREE_TRIAL" : (transaction.isInIntroOfferPeriod ? "PAY_AS_YOU_GO" : nil),
            inAppOwnershipType: transaction.ownership.rawValue, storefront: transaction.storefront, signedDate: signedDate
        )
        if revoked != nil, !transaction.isUpgraded {
            switch (transaction.ownership, transaction.revocationPercentage) {
            case (.familyShared, _): fields["revocationType"] = "FAMILY_REVOKE"
            case (_, let share?): fields["revocationType"] = "REFUND_PRORATED"; fields["revocationPercentage"] = share
            case (_, nil): fields["revocationType"] = "REFUND_FULL"
            }
        }
        if let product, product.advancedCommerce, let unit {
            fields["advancedCommerceInfo"] = Self.advancedCommerceInfo(product: product, unitPrice: unit, transaction: transaction)
        }
        return fields
    }

    /// Apple's `advancedCommerceInfo` of a transaction: descriptors, the items bought (a list of
    /// objects, its key upper-case `SKU`), the tax, the period, a request reference.
    static func advancedCommerceInfo(product: SimulatedProduct, unitPrice: Int64, transaction: SimulatorTransaction) -> [String: Any] {
        var info: [String: Any] = [
            "descriptors": ["description": "\(product.productId) plan", "displayName": product.productId],
            "estimatedTax": unitPrice / 10,
            "items": [[
                "SKU": "\(product.productId).sku", "description": "\(product.productId) item", "displayName": product.productId,
                "price": unitPrice * Int64(transaction.quantity),
            ] as [String: Any]],
            "requestReferenceId": "ref-\(transaction.transactionId)",
            "taxCode": "C003-00-2", "taxExclusivePrice": unitPrice - unitPrice / 10, "taxRate": "0.10",
        ]
        if let duration = product.duration, product.type == .autoRenewable { info["period"] = duration == .sevenDays ? "P1W" : duration.rawValue }
        return info
    }

    /// The renewal info of the subscription `transaction` is a period of.
    func renewalFields(
        of transaction: SimulatorTransaction, subscription: SimulatorStore.SubscriptionView?, environment: StoreEnvironment, signedDate: Date
    ) -> [String: Any] {
        Self.renewalInfo(
            originalTransactionId: transaction.originalTransactionId, productId: transaction.productId,
            autoRenewProductId: subscription?.autoRenewProductId, autoRenewStatus: (subscription?.willRenew ?? true) ? 1 : 0,
            environment: environment, expirationIntent: subscription?.expirationIntent, isInBillingRetryPeriod: subscription?.isInBillingRetry,
            gracePeriodExpiresDate: subscription?.gracePeriodExpiresDate, renewalDate: transaction.expiresDate, signedDate: signedDate
        )
    }
}
