import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

/// StoreKit 2's naming of a transaction (`transactionId`, `purchaseDate` in milliseconds, `price`
/// in milliunits, `revocationDate`), read by the same `AppStoreFields` and judged by the same fold
/// as verifyReceipt's.
@Suite struct SignedFieldsTests {
    static func signed(
        _ id: String, _ product: String, original: String? = nil, type: String = "Consumable", quantity: Int = 1,
        purchased: Date = TestTransaction.defaultDate, expires: Date? = nil, price: String? = "990", currency: String = "USD",
        revoked: Date? = nil, signed: Date = TestTransaction.defaultDate, extra: [String: String] = [:]
    ) -> [String: String] {
        var fields = ["transactionId": id, "originalTransactionId": original ?? id, "productId": product, "type": type,
                      "quantity": String(quantity), "purchaseDate": String(purchased.milliseconds), "currency": currency,
                      "inAppOwnershipType": "PURCHASED", "bundleId": "com.example.app", "environment": "Production",
                      "signedDate": String(signed.milliseconds)]
        if let price { fields["price"] = price }
        if let expires {
            fields["expiresDate"] = String(expires.milliseconds)
            fields["webOrderLineItemId"] = "w\(id)"
        }
        if let revoked {
            fields["revocationDate"] = String(revoked.milliseconds)
            fields["revocationReason"] = "1"
        }
        return fields.merging(extra) { $1 }
    }

    @Test("signed fields mean what the receipt's mean")
    func readsSignedNaming() {
        let revoked = utc("2025-01-03T00:00:00.000Z")
        let fields = AppStoreFields(Self.signed("7", "pro", original: "5", type: "Auto-Renewable Subscription",
                                                expires: utc("2025-02-01T00:00:00.000Z"), price: "4990", revoked: revoked,
                                                extra: ["offerType": "1", "offerDiscountType": "FREE_TRIAL", "isUpgraded": "true"]))
        #expect(fields.isSigned)
        #expect(fields.transactionId == "7" && fields.originalTransactionId == "5" && fields.productId == "pro")
        #expect(fields.purchaseDate == TestTransaction.defaultDate && fields.expiresDate == utc("2025-02-01T00:00:00.000Z"))
        #expect(fields.cancellationDate == revoked && fields.cancellationReason == 1)
        #expect(fields.webOrderLineItemId == "w7" && fields.isUpgraded && fields.isTrialPeriod && fields.isInIntroOfferPeriod)
        #expect(fields.price == AppStorePrice(amount: "4.99", currency: "USD") && fields.appStoreProductType == .autoRenewable)
        #expect(fields.signedDate == TestTransaction.defaultDate)
        // The receipt's naming has none of the signed extras.
        let receipt = AppStoreFields(TestTransaction.coins("8").fields)
        #expect(!receipt.isSigned && receipt.price == nil && receipt.appStoreProductType == nil)
    }

    @Test("milliunits become decimal text", arguments: [("990", "0.99"), ("1000", "1"), ("120000", "120"), ("4500", "4.5"), ("1", "0.001"),
                                                         ("0", "0"), ("-990", "-0.99")])
    func milliunits(_ pair: (String, String)) {
        #expect(AppStoreFields(Self.signed("1", "coins", price: pair.0)).price?.amount == pair.1)
    }

    @Test("a signed view says the same as a receipt's view of the same transaction, and a re-signed one as itself")
    func saysTheSame() {
        let receipt = AppStoreFields(TestTransaction("1", "coins", quantity: 2).fields)
        let signed = AppStoreFields(Self.signed("1", "coins", quantity: 2))
        #expect(signed.saysTheSame(as: receipt) && receipt.saysTheSame(as: signed))
        let resigned = AppStoreFields(Self.signed("1", "coins", quantity: 2, signed: utc("2025-03-01T00:00:00.000Z"),
                                                  extra: ["deviceVerification": "abc", "deviceVerificationNonce": "n"]))
        #expect(signed.saysTheSame(as: resigned) && resigned.saysTheSame(as: signed))
        let refunded = AppStoreFields(Self.signed("1", "coins", quantity: 2, revoked: utc("2025-01-02T00:00:00.000Z")))
        #expect(!signed.saysTheSame(as: refunded) && !receipt.saysTheSame(as: refunded))
        let repriced = AppStoreFields(Self.signed("1", "coins", quantity: 2, price: "1990"))
        #expect(!signed.saysTheSame(as: repriced), "within one naming every field counts")
    }

    @Test("Apple's price and type judge a transaction the catalog does not know; a receipt view later keeps them")
    func applePriceAndType() throws {
        var stream = UserStream(catalog: ProductCatalog())
        let answer = AppStoreAnswer(receiptHash: String(repeating: "a", count: 64), answerHash: String(repeating: "b", count: 64),
                                    environment: .production, status: 0, answeredAt: TestTransaction.defaultDate,
                                    transactions: [Self.signed("1", "gems", type: "Non-Consumable", price: "2990", currency: "EUR")],
                                    renewalInfo: [])
        stream.append(try UserDecisions.observeReceipt(answer, app: "com.example.app", deviceId: "phone", digest: TestReceipts.digest,
                                                       on: stream.state).events)
        let judged = try #require(stream.transaction("1"))
        #expect(judged.productType == .nonConsumable && judged.kind == .purchase)
        #expect(judged.price == "2.99" && judged.currency == "EUR" && judged.priceSource == .appStore)

        // The receipt's view of the same transaction: nothing new, nothing recorded.
        let again = try stream.receipt([TestTransaction("1", "gems")])
        #expect(again.events.isEmpty && again.duplicates == ["1"])
        // A refund seen in a receipt replaces the fields, and Apple's price stays.
        try stream.receipt([TestTransaction("1", "gems", cancelled: utc("2025-01-02T00:00:00.000Z"))])
        let refunded = try #require(stream.transaction("1"))
        #expect(refunded.isRevoked && refunded.price == "2.99" && refunded.priceSource == .appStore)
    }

    @Test("an older signature of a transaction records nothing and never undoes a later one")
    func olderSignatures() throws {
        var stream = UserStream(catalog: catalog)
        func post(_ fields: [String: String]) throws -> ReceiptDecision {
            let answer = AppStoreAnswer(receiptHash: String(repeating: "c", count: 64), answerHash: String(repeating: "d", count: 64),
                                        environment: .production, status: 0, answeredAt: TestTransaction.defaultDate,
                                        transactions: [fields], renewalInfo: [])
            let decision = try UserDecisions.observeReceipt(answer, app: "com.example.app", deviceId: "phone", digest: TestReceipts.digest,
                                                            on: stream.state)
            stream.append(decision.events)
            return decision
        }
        let refund = Self.signed("1", "levels", type: "Non-Consumable", revoked: utc("2025-01-05T00:00:00.000Z"),
                                 signed: utc("2025-01-05T00:00:00.000Z"))
        let purchase = Self.signed("1", "levels", type: "Non-Consumable", signed: utc("2025-01-01T00:00:00.000Z"))
        _ = try post(refund)
        #expect(stream.transaction("1")?.isRevoked == true)
        let late = try post(purchase)
        #expect(late.events.isEmpty && late.duplicates == ["1"])
        #expect(stream.transaction("1")?.isRevoked == true)

        // Recorded anyway (a notification applied late, say), the fold keeps the later signature.
        stream.append([PendingEvent(.appStoreTransactionObserved(AppStoreTransactionObserved(
            transactionId: "1", environment: .production, fields: purchase, receiptHash: String(repeating: "c", count: 64),
            deviceId: "", answeredAt: TestTransaction.defaultDate, status: 0
        )))])
        #expect(stream.transaction("1")?.isRevoked == true)
        #expect(!stream.state.devices.contains(""), "Apple alone names no device")
    }

    @Test("a billing grace period keeps the latest period running until it ends, in either naming")
    func gracePeriod() throws {
        let start = utc("2025-01-01T00:00:00.000Z"), end = utc("2025-02-01T00:00:00.000Z"), grace = utc("2025-02-17T00:00:00.000Z")
        for (naming, info) in [
            ("receipt", ["original_transaction_id": "1", "auto_renew_status": "1", "is_in_billing_retry_period": "1",
                         "grace_period_expires_date_ms": String(grace.milliseconds), "expiration_intent": "2"]),
            ("signed", ["originalTransactionId": "1", "autoRenewStatus": "1", "isInBillingRetryPeriod": "true",
                        "gracePeriodExpiresDate": String(grace.milliseconds), "expirationIntent": "2", "signedDate": String(end.milliseconds)]),
        ] {
            var stream = UserStream(catalog: catalog)
            try stream.receipt([TestTransaction("1", "pro", purchased: start, expires: end)])
            let entitlements = { (at: String) in stream.state.entitlements(catalog: catalog, at: utc(at)).subscriptions.first?.activeUntil }
            #expect(entitlements("2025-02-05T00:00:00.000Z") == nil, "\(naming): lapsed, before any renewal info")
            let answer = TestReceipts.answer([], renewalInfo: [info], receipt: "retry-\(naming)")
            stream.append(try UserDecisions.observeReceipt(answer, app: "com.example.app", deviceId: "phone", digest: TestReceipts.digest,
                                                           on: stream.state).events)
            #expect(entitlements("2025-02-05T00:00:00.000Z") == grace, "\(naming): in the grace period")
            #expect(entitlements("2025-02-18T00:00:00.000Z") == nil, "\(naming): the grace period is over")
            // Billing recovered: the renewal info says so, and the period ends where it was paid to.
            var recovered = info
            recovered[naming == "receipt" ? "is_in_billing_retry_period" : "isInBillingRetryPeriod"] = naming == "receipt" ? "0" : "false"
            let again = TestReceipts.answer([], renewalInfo: [recovered], receipt: "recovered-\(naming)")
            stream.append(try UserDecisions.observeReceipt(again, app: "com.example.app", deviceId: "phone", digest: TestReceipts.digest,
                                                           on: stream.state).events)
            #expect(entitlements("2025-02-05T00:00:00.000Z") == nil, "\(naming): no more grace")
        }
    }

    @Test("a notification is recorded once, with only what it says that is news")
    func notifications() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([TestTransaction.coins("1", quantity: 5)])
        stream.append([PendingEvent(.itemConsumed(ItemConsumed(productId: "coins", quantity: 4, deviceId: "phone")))])
        let notification = AppStoreNotificationReceived(
            notificationUUID: "n-1", notificationType: "REFUND", subtype: nil, environment: .production, signedDate: utc("2025-01-06T00:00:00.000Z"),
            fields: ["version": "2.0"], transaction: Self.signed("1", "coins", quantity: 5, revoked: utc("2025-01-06T00:00:00.000Z")),
            renewalInfo: nil, payloadHash: String(repeating: "e", count: 64)
        )
        let events = try UserDecisions.observeNotification(notification, app: "com.example.app", digest: TestReceipts.digest, on: stream.state)
        #expect(events.count == 2)
        #expect(events.first?.deduplicationKey?.rawValue == "appstore/com.example.app/production/notification/n-1")
        stream.append(events)
        #expect(stream.state.balance(of: "coins") == -4, "refunded after 4 of 5 were used: overdrawn")
        #expect(stream.state.facts.notifications.map(\.type) == ["REFUND"])
        #expect(stream.state.facts.notifications.first?.originalTransactionId == "1")
        let applied = try UserDecisions.observeNotification(notification, app: "com.example.app", applied: true, digest: TestReceipts.digest,
                                                            on: stream.state)
        #expect(applied.count == 1, "nothing of the transaction is news any more")
        #expect(applied.first?.deduplicationKey?.rawValue == "appstore/com.example.app/production/notification_applied/n-1")
    }

    @Test("an identifier longer than any of Apple's is refused in either naming, in a transaction or a renewal-info entry")
    func identifiersLongerThanApplesAreRefused() throws {
        func answer(transactions: [[String: String]], renewalInfo: [[String: String]] = []) -> AppStoreAnswer {
            AppStoreAnswer(receiptHash: String(repeating: "a", count: 64), answerHash: String(repeating: "b", count: 64),
                           environment: .production, status: 0, answeredAt: TestTransaction.defaultDate,
                           transactions: transactions, renewalInfo: renewalInfo)
        }
        let long = String(repeating: "é", count: 128)  // 128 characters, 256 bytes
        let fine = String(repeating: "p", count: 255)
        try answer(transactions: [Self.signed("1", fine)], renewalInfo: [["autoRenewProductId": fine, "originalTransactionId": "1"]])
            .checkRecordable(app: "com.example.app")
        let refused: [(String, AppStoreAnswer)] = [
            ("productId", answer(transactions: [Self.signed("1", long)])),
            ("appAccountToken", answer(transactions: [Self.signed("1", "gems", extra: ["appAccountToken": long])])),
            ("autoRenewProductId", answer(transactions: [Self.signed("1", "gems")], renewalInfo: [["autoRenewProductId": long, "originalTransactionId": "1"]])),
            ("auto_renew_product_id", answer(transactions: [], renewalInfo: [["auto_renew_product_id": long, "original_transaction_id": "1"]])),
            ("web_order_line_item_id", answer(transactions: [["transaction_id": "2", "product_id": "gems", "web_order_line_item_id": long]])),
        ]
        for (field, answer) in refused {
            let error = try #require(throws: DecisionError.self, "\(field)") { try answer.checkRecordable(app: "com.example.app") }
            #expect(error.message.contains("has a \(field) of 256 bytes"), "\(error.message)")
            #expect(error.message.hasSuffix("nothing of this receipt was recorded"))
        }
    }
}
