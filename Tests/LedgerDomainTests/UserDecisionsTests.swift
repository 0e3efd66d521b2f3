import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

/// A user's stream in memory: decide, then apply what was decided, as the command handler will,
/// each event at the next log position.
struct UserStream {
    var state: UserLedger
    var position: Int64 = 100

    init(catalog: ProductCatalog) {
        state = UserLedger().classified(by: catalog)
    }

    @discardableResult
    mutating func append(_ events: [PendingEvent]) -> [PendingEvent] {
        for event in events {
            position += 1
            state.apply(event.event, version: state.version + 1, context: .init(position: position, recordedAt: nil))
        }
        return events
    }

    @discardableResult
    mutating func receipt(
        _ transactions: [TestTransaction], device: String = "phone", price: String? = nil, currency: String = "USD",
        environment: StoreEnvironment = .production, status: Int = 0, answeredAt: String = "2025-01-01T00:00:00.000Z",
        excluding: Set<String> = []
    ) throws -> ReceiptDecision {
        let decision = try TestReceipts.observe(
            transactions, device: device, price: price, currency: price == nil ? nil : currency, environment: environment,
            status: status, answeredAt: utc(answeredAt), excluding: excluding, on: state
        )
        append(decision.events)
        return decision
    }

    func transaction(_ id: String) -> UserLedger.Transaction? { state.transactions[id] }
}

let catalog = ProductCatalog(products: [
    try! Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]),
    try! Product(productId: "levels", type: .nonConsumable, prices: ["USD": "4.99"]),
    try! Product(productId: "pro", type: .autoRenewable, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "pro",
                 prices: ["USD": "2.99", "EUR": "2.49"]),
    try! Product(productId: "pro.plus", type: .autoRenewable, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "pro",
                 prices: ["USD": "5.99"]),
    try! Product(productId: "gold.month", type: .nonRenewing, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "gold"),
    try! Product(productId: "gold.week", type: .nonRenewing, duration: try! ISODuration(parsing: "P7D"), subscriptionGroup: "gold"),
])

/// An App Store transaction, as fields (`expires` makes it an auto-renewable period with a line item of its own).
func transaction(
    _ id: String, _ product: String, original: String? = nil, quantity: Int = 1,
    date: String = "2025-01-01T00:00:00.000Z", expires: String? = nil, cancelled: String? = nil, lineItem: String? = nil,
    extra: [String: String] = [:]
) -> TestTransaction {
    TestTransaction(id, product, original: original, quantity: quantity, purchased: utc(date), expires: expires.map(utc),
                    lineItem: lineItem, cancelled: cancelled.map(utc), extra: extra)
}

func types(_ events: [PendingEvent]) -> [String] {
    events.map { type(of: $0.event.payload).typeName.name }
}

@Suite("Recording what the App Store said, as facts")
struct RecordReceiptTests {
    @Test("a first receipt records the post and the transaction with every field; the fold calls it a purchase")
    func firstPurchase() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "coins", quantity: 3, extra: ["promotional_offer_id": "spring"])], price: "0.99")
        #expect(types(decision.events) == ["ReceiptPosted", "AppStoreTransactionObserved"])
        #expect(decision.events[1].deduplicationKey?.rawValue == "appstore/com.example.app/production/transaction/1")
        guard case .appStoreTransactionObserved(let observed) = decision.events[1].event else { return }
        #expect(observed.fields["promotional_offer_id"] == "spring", "fields the ledger does not use yet are kept")
        #expect(stream.transaction("1")?.kind == .purchase)
        #expect(stream.state.balance(of: "coins") == 3)
    }

    @Test("the same receipt again records nothing and names the duplicates; changed fields are a new fact")
    func duplicateAndChanged() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "coins", quantity: 2)])
        let again = try stream.receipt([transaction("1", "coins", quantity: 2)])
        #expect(again.events.isEmpty)
        #expect(again.duplicates == ["1"])
        let refunded = try stream.receipt([transaction("1", "coins", quantity: 2, cancelled: "2025-01-02T00:00:00.000Z")])
        #expect(types(refunded.events) == ["ReceiptPosted", "AppStoreTransactionObserved"])
        #expect(refunded.events[1].deduplicationKey?.rawValue.hasPrefix("appstore/com.example.app/production/observation/1/") == true)
        #expect(stream.transaction("1")?.isRevoked == true)
        #expect(stream.transaction("1")?.revokedAt == utc("2025-01-02T00:00:00.000Z"))
        #expect(stream.state.balance(of: "coins") == 0)
        #expect(try stream.receipt([transaction("1", "coins", quantity: 2, cancelled: "2025-01-02T00:00:00.000Z")]).events.isEmpty)
    }

    @Test("an owned non-consumable bought again is a restore; bought in the other environment it is a purchase there")
    func rePurchaseAndEnvironments() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "levels")], environment: .sandbox)
        try stream.receipt([transaction("2", "levels", date: "2025-02-01T00:00:00.000Z")], price: "4.99")
        #expect(stream.transaction("2")?.kind == .purchase, "a TestFlight copy does not turn a production purchase into a restore")
        #expect(stream.transaction("2")?.isRevenue == true)
        #expect(stream.transaction("1")?.isRevenue == false, "sandbox is never revenue")
        try stream.receipt([transaction("3", "levels", date: "2025-03-01T00:00:00.000Z")], device: "tablet")
        #expect(stream.transaction("3")?.kind == .restore)
        #expect(stream.transaction("3")?.restores == "2")
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-04-01T00:00:00.000Z")).owned.count == 1)
    }

    @Test("a restore whose original the stream never saw grants ownership, with no money and its origin unknown")
    func restoreOfUnknownOriginal() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("9", "levels", original: "1", date: "2025-02-01T00:00:00.000Z")])
        let restored = try #require(stream.transaction("9"))
        #expect(restored.kind == .restore)
        #expect(restored.restores == nil)
        #expect(!restored.isRevenue)
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-03-01T00:00:00.000Z")).owned.map(\.productId) == ["levels"])
    }

    @Test("a refund on a restore's transaction id revokes the purchase it restores")
    func refundOnRestore() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "levels")])
        try stream.receipt([transaction("5", "levels", original: "1", date: "2025-02-01T00:00:00.000Z")], device: "tablet")
        try stream.receipt([transaction("5", "levels", original: "1", date: "2025-02-01T00:00:00.000Z", cancelled: "2025-02-03T00:00:00.000Z")],
                           device: "tablet")
        #expect(stream.transaction("1")?.isRevoked == true)
        #expect(stream.transaction("1")?.revokedAt == utc("2025-02-03T00:00:00.000Z"))
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-03-01T00:00:00.000Z")).owned.isEmpty)
    }

    @Test("a restored period (new transaction id, the payment's web_order_line_item_id) is not a second renewal")
    func restoredPeriodIsNotARenewal() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([
            transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z", lineItem: "w1"),
            transaction("11", "pro", original: "10", date: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z", lineItem: "w2"),
        ], price: "2.99")
        // A later receipt, after a StoreKit restore on a new device: the same periods, new ids.
        try stream.receipt([
            transaction("20", "pro", original: "10", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z", lineItem: "w1"),
            transaction("21", "pro", original: "10", date: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z", lineItem: "w2"),
        ], device: "tablet")
        #expect(stream.transaction("10")?.kind == .purchase)
        #expect(stream.transaction("11")?.kind == .renewal)
        #expect(stream.transaction("20")?.kind == .restore)
        #expect(stream.transaction("21")?.kind == .restore)
        #expect(stream.transaction("21")?.restores == "11")
        #expect(stream.state.transactionsInOrder.filter(\.isRevenue).map(\.transactionId) == ["10", "11"])
    }

    @Test("renewals extend an auto-renewable; it is active until the latest non-revoked expiry")
    func renewals() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([
            transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z"),
            transaction("11", "pro", original: "10", date: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z"),
        ])
        let active = stream.state.entitlements(catalog: catalog, at: utc("2025-02-15T00:00:00.000Z"))
        #expect(active.subscriptions.first?.isActive == true)
        #expect(active.subscriptions.first?.expiresAt == utc("2025-03-01T00:00:00.000Z"))
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-03-01T00:00:00.000Z")).subscriptions.first?.isActive == false)

        stream.append(try UserDecisions.revoke(transactionId: "11", revokedAt: utc("2025-02-10T00:00:00.000Z"), reason: "refund", on: stream.state))
        let afterRefund = stream.state.entitlements(catalog: catalog, at: utc("2025-02-15T00:00:00.000Z"))
        #expect(afterRefund.subscriptions.first?.isActive == false, "the refunded renewal's period is taken back")
    }

    @Test("21006 before expiry: the subscription ends when the App Store said it was over; after expiry it changes nothing")
    func expiryReports() throws {
        var stream = UserStream(catalog: catalog)
        let purchase = transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")
        try stream.receipt([purchase])
        let decision = try stream.receipt([purchase], status: 21006, answeredAt: "2025-01-10T12:00:00.000Z")
        #expect(types(decision.events) == ["ReceiptPosted", "AppStoreTransactionObserved"])
        let after = stream.state.entitlements(catalog: catalog, at: utc("2025-01-20T00:00:00.000Z")).subscriptions.first
        #expect(after?.isActive == false, "cancelled on the 10th, though the period ran to February 1")
        #expect(stream.state.autoRenewablePeriods(catalog: catalog).map(\.end) == [utc("2025-01-10T12:00:00.000Z")])
        #expect(try stream.receipt([purchase], status: 21006, answeredAt: "2025-01-11T00:00:00.000Z").events.isEmpty, "reported once")

        var late = UserStream(catalog: catalog)
        try late.receipt([transaction("20", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")],
                         status: 21006, answeredAt: "2025-03-01T00:00:00.000Z")
        #expect(late.state.autoRenewablePeriods(catalog: catalog).map(\.end) == [utc("2025-02-01T00:00:00.000Z")])
    }

    @Test("prices: the device's on the newest purchase of its post, not on a newer renewal; renewals at the catalog's; trials zero")
    func prices() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([
            transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-01-08T00:00:00.000Z", extra: ["is_trial_period": "true"]),
            transaction("11", "pro", original: "10", date: "2025-01-08T00:00:00.000Z", expires: "2025-02-08T00:00:00.000Z"),
            transaction("1", "levels", date: "2025-01-05T00:00:00.000Z"),
        ], price: "4.49", currency: "USD")
        #expect(stream.transaction("10").map { [$0.price, $0.currency, $0.priceSource.rawValue] } == ["0", "USD", "trial"])
        #expect(stream.transaction("11").map { [$0.price, $0.currency, $0.priceSource.rawValue] } == ["2.99", "USD", "catalog"])
        let levels = try #require(stream.transaction("1"))
        #expect([levels.price, levels.currency, levels.priceSource.rawValue] == ["4.49", "USD", "device"],
                "the device delivered the purchase, not the renewal the App Store added after it")
        #expect(levels.catalogPrice == "4.99", "a device price that differs from the catalog's is kept and flagged")
    }

    @Test("an upgrade ends the old period without a refund; the new product's payment is an upgrade")
    func upgrade() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")])
        try stream.receipt([
            transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z",
                        cancelled: "2025-01-15T00:00:00.000Z", extra: ["is_upgraded": "true"]),
            transaction("11", "pro.plus", original: "10", date: "2025-01-15T00:00:00.000Z", expires: "2025-02-15T00:00:00.000Z"),
        ], price: "5.99")
        let old = try #require(stream.transaction("10"))
        #expect(!old.isRevoked, "an upgrade is not a refund")
        #expect(old.periodEnd == utc("2025-01-15T00:00:00.000Z"))
        #expect(stream.transaction("11")?.kind == .upgrade)
        let now = stream.state.entitlements(catalog: catalog, at: utc("2025-01-20T00:00:00.000Z"))
        #expect(now.subscriptions.filter(\.isActive).map(\.productId) == ["pro.plus"])
    }

    @Test("family-shared transactions give access and are never revenue")
    func familyShared() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "levels", extra: ["in_app_ownership_type": "FAMILY_SHARED"])])
        #expect(stream.transaction("1")?.isFamilyShared == true)
        #expect(stream.transaction("1")?.isRevenue == false)
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-02-01T00:00:00.000Z")).owned.map(\.productId) == ["levels"])
    }

    @Test("transactions another user holds are left out; the rest of the receipt is recorded")
    func excludedTransactions() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "levels"), transaction("2", "coins")], excluding: ["1"])
        #expect(stream.transaction("1") == nil)
        #expect(stream.transaction("2")?.kind == .purchase)
        guard case .receiptPosted(let post) = decision.events[0].event else { return }
        #expect(post.transactionIds == ["1", "2"], "the post says what the answer listed")
    }

    @Test("the catalog as it stood: a later change of duration rewrites no past period; an unknown product is classified once defined")
    func timeTrueCatalog() throws {
        var history = ProductCatalog()
        history.apply(ProductDefined(product: try Product(productId: "gold.month", type: .nonRenewing, duration: try ISODuration(parsing: "P1M"),
                                                          subscriptionGroup: "gold")), position: 10)
        var stream = UserStream(catalog: history)
        try stream.receipt([transaction("1", "gold.month", date: "2025-01-01T00:00:00.000Z"), transaction("2", "mystery")])
        history.apply(ProductDefined(product: try Product(productId: "gold.month", type: .nonRenewing, duration: try ISODuration(parsing: "P2M"),
                                                          subscriptionGroup: "gold")), position: 1_000)
        history.apply(ProductDefined(product: try Product(productId: "mystery", type: .nonConsumable)), position: 1_001)
        let state = stream.state.classified(by: history)
        #expect(state.nonRenewingPeriods(catalog: history).map(\.end) == [utc("2025-02-01T00:00:00.000Z")])
        #expect(state.transactions["2"]?.productType == .nonConsumable)
    }

    @Test("version-1 verdict events read through the upcaster give the same answers")
    func upcastsVersionOne() throws {
        var state = UserLedger()
        let date = utc("2025-01-01T00:00:00.000Z")
        let events: [UserEvent] = [
            .deviceRegistered(DeviceRegistered(deviceId: "phone")),
            .purchaseRecorded(PurchaseRecorded(transactionId: "1", originalTransactionId: "1", productId: "levels", productType: .nonConsumable,
                                               quantity: 1, purchaseDate: date, environment: .production, deviceId: "phone",
                                               price: "4.99", currency: "USD", receiptHash: "h")),
            .purchaseRecorded(PurchaseRecorded(transactionId: "10", originalTransactionId: "10", productId: "pro", productType: .autoRenewable,
                                               quantity: 1, purchaseDate: date, expiresDate: utc("2025-02-01T00:00:00.000Z"),
                                               environment: .production, deviceId: "phone", receiptHash: "h")),
            .subscriptionRenewed(SubscriptionRenewed(transactionId: "11", originalTransactionId: "10", productId: "pro",
                                                     purchaseDate: utc("2025-02-01T00:00:00.000Z"), expiresDate: utc("2025-03-01T00:00:00.000Z"),
                                                     environment: .production, receiptHash: "h")),
            .purchaseRestored(PurchaseRestored(transactionId: "2", originalTransactionId: "1", productId: "levels", deviceId: "tablet",
                                               purchaseDate: utc("2025-02-01T00:00:00.000Z"), environment: .production, receiptHash: "h")),
            .purchaseRevoked(PurchaseRevoked(transactionId: "11", revokedAt: utc("2025-02-10T00:00:00.000Z"), reason: "refunded")),
        ]
        for (index, event) in events.enumerated() { state.apply(event, version: Int64(index + 1), context: .init(position: Int64(index + 1), recordedAt: nil)) }
        state = state.classified(by: catalog)
        #expect(state.transactionsInOrder.map(\.kind) == [.purchase, .purchase, .renewal, .restore])
        #expect(state.transactions["1"].map { [$0.price, $0.priceSource.rawValue] } == ["4.99", "device"])
        #expect(state.transactions["2"]?.restores == "1")
        #expect(state.transactions["11"]?.isRevoked == true)
        #expect(state.deliveries.map(\.deviceId) == ["phone", "phone", "tablet"])
    }
}

@Suite("Consuming, revoking and restoring")
struct UserCommandTests {
    @Test("consuming exactly the balance is allowed; one more is refused with the balance")
    func consumeBalance() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "coins", quantity: 3)])
        stream.append(try UserDecisions.consume(productId: "coins", quantity: 3, deviceId: "phone", catalog: catalog, on: stream.state))
        #expect(stream.state.balance(of: "coins") == 0)
        let error = try #require(throws: DecisionError.self) {
            try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: stream.state)
        }
        #expect(error.code == .insufficientBalance)
        #expect(error.balance == 0)
        #expect(error.message.contains("balance is 0"))
    }

    @Test("only consumables are consumed, in sane quantities")
    func consumeRefusals() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "levels")])
        #expect(throws: DecisionError.notConsumable(productId: "levels", type: .nonConsumable)) {
            try UserDecisions.consume(productId: "levels", quantity: 1, deviceId: "phone", catalog: catalog, on: stream.state)
        }
        #expect(throws: DecisionError.invalidQuantity(0)) {
            try UserDecisions.consume(productId: "coins", quantity: 0, deviceId: "phone", catalog: catalog, on: stream.state)
        }
    }

    @Test("a revocation after consumption takes the balance below zero, shown not hidden")
    func negativeBalance() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "coins", quantity: 2)])
        stream.append(try UserDecisions.consume(productId: "coins", quantity: 2, deviceId: "phone", catalog: catalog, on: stream.state))
        stream.append(try UserDecisions.revoke(transactionId: "1", revokedAt: utc("2025-01-05T00:00:00.000Z"), reason: "chargeback", on: stream.state))
        #expect(stream.state.balance(of: "coins") == -2)
    }

    @Test("revoking an unknown or already revoked transaction is refused")
    func revokeRefusals() throws {
        var stream = UserStream(catalog: catalog)
        #expect(throws: DecisionError.unknownTransaction("9")) {
            try UserDecisions.revoke(transactionId: "9", revokedAt: Date(), reason: "x", on: stream.state)
        }
        try stream.receipt([transaction("1", "levels")])
        stream.append(try UserDecisions.revoke(transactionId: "1", revokedAt: Date(), reason: "refund", on: stream.state))
        #expect(throws: DecisionError.alreadyRevoked("1")) {
            try UserDecisions.revoke(transactionId: "1", revokedAt: Date(), reason: "again", on: stream.state)
        }
    }

    @Test("restoring to a new device returns every stacked period and records the delivery once")
    func restoreToDevice() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([
            transaction("1", "gold.month", date: "2025-01-31T00:00:00.000Z"),
            transaction("2", "gold.week", date: "2025-02-01T00:00:00.000Z"),
        ])
        let (events, periods) = UserDecisions.restoreNonRenewing(toDevice: "tablet", catalog: catalog, on: stream.state)
        #expect(types(events) == ["DeviceRegistered", "SubscriptionRestoredToDevice"])
        #expect(periods.map(\.end) == [utc("2025-02-28T00:00:00.000Z"), utc("2025-03-07T00:00:00.000Z")])
        stream.append(events)

        let (again, samePeriods) = UserDecisions.restoreNonRenewing(toDevice: "tablet", catalog: catalog, on: stream.state)
        #expect(again.isEmpty, "a repeated restore records nothing new")
        #expect(samePeriods == periods)
        #expect(stream.state.deliveredToDevice["tablet"] == ["1", "2"])
    }
}
