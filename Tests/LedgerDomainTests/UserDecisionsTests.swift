import Foundation
import LedgerDomain
import Testing

/// A user's stream in memory: decide, then apply what was decided, as the command handler will.
struct UserStream {
    var state = UserLedger()
    let catalog: ProductCatalog

    @discardableResult
    mutating func append(_ events: [PendingEvent]) -> [PendingEvent] {
        for event in events { state.apply(event.event, version: state.version + 1) }
        return events
    }

    @discardableResult
    mutating func receipt(_ transactions: [VerifiedTransaction], device: String = "phone", price: String? = nil) throws -> ReceiptDecision {
        let decision = try UserDecisions.recordReceipt(
            transactions, app: "com.example.app", deviceId: device, price: price, currency: price == nil ? nil : "USD",
            receiptHash: "abc", catalog: catalog, on: state
        )
        append(decision.events)
        return decision
    }
}

let catalog = ProductCatalog(products: [
    try! Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]),
    try! Product(productId: "levels", type: .nonConsumable),
    try! Product(productId: "pro", type: .autoRenewable, duration: try! ISODuration(parsing: "P1M")),
    try! Product(productId: "gold.month", type: .nonRenewing, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "gold"),
    try! Product(productId: "gold.week", type: .nonRenewing, duration: try! ISODuration(parsing: "P7D"), subscriptionGroup: "gold"),
])

func transaction(
    _ id: String, _ product: String, kind: VerifiedTransaction.Kind = .purchase, original: String? = nil, quantity: Int = 1,
    date: String = "2025-01-01T00:00:00.000Z", expires: String? = nil, cancelled: String? = nil,
    environment: StoreEnvironment = .production
) -> VerifiedTransaction {
    VerifiedTransaction(
        kind: kind, transactionId: id, originalTransactionId: original ?? id, productId: product, quantity: quantity,
        purchaseDate: utc(date), expiresDate: expires.map(utc), cancellationDate: cancelled.map(utc), environment: environment
    )
}

func types(_ events: [PendingEvent]) -> [String] {
    events.map { type(of: $0.event.payload).typeName.name }
}

@Suite("Recording what the App Store confirmed")
struct RecordReceiptTests {
    @Test("a first receipt registers the device and records the purchase with its key")
    func firstPurchase() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "coins", quantity: 3)], price: "0.99")
        #expect(types(decision.events) == ["DeviceRegistered", "PurchaseRecorded"])
        #expect(decision.events[1].deduplicationKey?.rawValue == "appstore/com.example.app/production/payment/1")
        #expect(stream.state.balance(of: "coins") == 3)
    }

    @Test("the same receipt again records nothing and names the duplicates")
    func duplicateReceipt() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "coins")])
        let again = try stream.receipt([transaction("1", "coins")])
        #expect(again.events.isEmpty)
        #expect(again.duplicates == ["1"])
    }

    @Test("buying an owned non-consumable again is the same ownership: a restore, not a second purchase")
    func rePurchase() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "levels")])
        let again = try stream.receipt([transaction("2", "levels", date: "2025-02-01T00:00:00.000Z")], device: "tablet")
        #expect(types(again.events) == ["DeviceRegistered", "PurchaseRestored"])
        guard case .purchaseRestored(let restored) = again.events[1].event else { return }
        #expect(restored.originalTransactionId == "1")
        let entitlements = stream.state.entitlements(catalog: catalog, at: utc("2025-03-01T00:00:00.000Z"))
        #expect(entitlements.owned.map(\.productId) == ["levels"])
        #expect(entitlements.owned.count == 1)
    }

    @Test("renewals extend an auto-renewable; it is active until the latest non-revoked expiry")
    func renewals() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([
            transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z"),
            transaction("11", "pro", kind: .renewal, original: "10", date: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z"),
        ])
        let active = stream.state.entitlements(catalog: catalog, at: utc("2025-02-15T00:00:00.000Z"))
        #expect(active.subscriptions.first?.isActive == true)
        #expect(active.subscriptions.first?.expiresAt == utc("2025-03-01T00:00:00.000Z"))
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-03-01T00:00:00.000Z")).subscriptions.first?.isActive == false)

        stream.append(try UserDecisions.revoke(transactionId: "11", revokedAt: utc("2025-02-10T00:00:00.000Z"), reason: "refund", on: stream.state))
        let afterRefund = stream.state.entitlements(catalog: catalog, at: utc("2025-02-15T00:00:00.000Z"))
        #expect(afterRefund.subscriptions.first?.isActive == false, "the refunded renewal's period is taken back")
    }

    @Test("21006 before expiry: the subscription ends when the App Store said it was over, not at expires_date")
    func cancelledBySupport() throws {
        var stream = UserStream(catalog: catalog)
        let purchase = transaction("10", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")
        try stream.receipt([purchase])
        var over = purchase
        over.expiryReportedAt = utc("2025-01-10T12:00:00.000Z")
        let decision = try stream.receipt([over])
        #expect(types(decision.events) == ["SubscriptionExpiryReported"])
        #expect(decision.events.first?.deduplicationKey?.rawValue == "appstore/com.example.app/production/expiry_report/10")

        let before = stream.state.entitlements(catalog: catalog, at: utc("2025-01-09T00:00:00.000Z")).subscriptions.first
        #expect(before?.isActive == true)
        #expect(before?.activeUntil == utc("2025-01-10T12:00:00.000Z"))
        let after = stream.state.entitlements(catalog: catalog, at: utc("2025-01-20T00:00:00.000Z")).subscriptions.first
        #expect(after?.isActive == false, "cancelled on the 10th, though the period ran to February 1")
        #expect(stream.state.autoRenewablePeriods(catalog: catalog).map(\.end) == [utc("2025-01-10T12:00:00.000Z")])
        #expect(try stream.receipt([over]).events.isEmpty, "reported once")
    }

    @Test("21006 after expiry is recorded too, and changes nothing: the period ended as its dates say")
    func expiredAsItsDatesSay() throws {
        var stream = UserStream(catalog: catalog)
        var expired = transaction("20", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")
        expired.expiryReportedAt = utc("2025-03-01T00:00:00.000Z")
        let decision = try stream.receipt([expired])
        #expect(types(decision.events) == ["DeviceRegistered", "PurchaseRecorded", "SubscriptionExpiryReported"])
        #expect(stream.state.autoRenewablePeriods(catalog: catalog).map(\.end) == [utc("2025-02-01T00:00:00.000Z")])
    }

    @Test("a refunded transaction in the receipt is recorded and revoked; a later refund of a known one is revoked")
    func refunds() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "coins", quantity: 2, cancelled: "2025-01-02T00:00:00.000Z")])
        #expect(types(decision.events) == ["DeviceRegistered", "PurchaseRecorded", "PurchaseRevoked"])
        #expect(decision.events[2].deduplicationKey?.rawValue == "appstore/com.example.app/production/revocation/1")
        #expect(stream.state.balance(of: "coins") == 0)

        try stream.receipt([transaction("2", "levels")])
        let refunded = try stream.receipt([transaction("2", "levels", cancelled: "2025-01-03T00:00:00.000Z")])
        #expect(types(refunded.events) == ["PurchaseRevoked"])
        #expect(refunded.duplicates == ["2"])
        #expect(stream.state.entitlements(catalog: catalog, at: utc("2025-02-01T00:00:00.000Z")).owned.isEmpty)
        #expect(try stream.receipt([transaction("2", "levels", cancelled: "2025-01-03T00:00:00.000Z")]).events.isEmpty)
    }

    @Test("the device's price goes on the newest new payment only, not on older transactions first seen now")
    func priceOnDeliveredPurchaseOnly() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([
            transaction("1", "coins", date: "2024-01-01T00:00:00.000Z"),
            transaction("2", "levels", date: "2024-06-01T00:00:00.000Z"),
            transaction("3", "coins", date: "2025-01-01T00:00:00.000Z"),
        ], price: "0.99")
        let prices = decision.events.compactMap { event -> String?? in
            if case .purchaseRecorded(let recorded) = event.event { return recorded.price } else { return nil }
        }
        #expect(prices == [nil, nil, "0.99"])
    }

    @Test("a product the catalog does not know is still recorded, as unknown")
    func unknownProduct() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "mystery.item")])
        guard case .purchaseRecorded(let recorded) = decision.events[1].event else {
            Issue.record("expected a purchase, got \(decision.events)")
            return
        }
        #expect(recorded.productType == .unknown)
    }

    @Test("sandbox and production transactions get distinct keys")
    func environmentsInKeys() throws {
        var stream = UserStream(catalog: catalog)
        let decision = try stream.receipt([transaction("1", "coins", environment: .sandbox)])
        #expect(decision.events[1].deduplicationKey?.rawValue == "appstore/com.example.app/sandbox/payment/1")
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
