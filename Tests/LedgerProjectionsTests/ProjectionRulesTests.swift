import Foundation
import LedgerDomain
import LedgerDomainTesting
import LedgerProjections
import Testing

func utc(_ text: String) -> Date { LedgerJSON.parseTimestamp(text)! }

let catalog = ProductCatalog(products: [
    try! Product(productId: "coins", type: .consumable),
    try! Product(productId: "levels", type: .nonConsumable),
    try! Product(productId: "pro", type: .autoRenewable, duration: try! ISODuration(parsing: "P1M")),
    try! Product(productId: "gold.month", type: .nonRenewing, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "gold"),
    try! Product(productId: "gold.week", type: .nonRenewing, duration: try! ISODuration(parsing: "P7D"), subscriptionGroup: "gold"),
])

/// A user's stream built through the decisions, with log positions, as the runner folds it.
struct History {
    var state = UserLedger()
    var position: Int64 = 0

    mutating func append(_ events: [PendingEvent]) {
        for event in events {
            position += 1
            state.apply(event.event, version: state.version + 1,
                        context: .init(position: position, recordedAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(position))))
        }
    }

    /// Posts one transaction as the App Store lists it; `original` makes a renewal (with `expires`) or a restore.
    mutating func buy(_ id: String, _ product: String, original: String? = nil,
                      quantity: Int = 1, at date: String, expires: String? = nil, device: String = "phone", price: String? = nil) throws {
        append(try TestReceipts.observe(
            [TestTransaction(id, product, original: original, quantity: quantity, purchased: utc(date), expires: expires.map(utc))],
            app: "app", device: device, price: price, currency: price == nil ? nil : "USD", on: state
        ).events)
    }

    mutating func revoke(_ id: String) throws {
        append(try UserDecisions.revoke(transactionId: id, revokedAt: utc("2025-06-01T00:00:00.000Z"), reason: "refund", on: state))
    }

    func rows(_ projection: any UserProjection.Type) -> [[String?]] {
        projection.columnValues(app: "app", user: "u", state: state.classified(by: catalog), catalog: catalog)
    }
}

@Suite("Projection rules, as pure folds")
struct ProjectionRulesTests {
    @Test("ownership: a non-consumable bought twice and restored is one row, for ever")
    func ownershipOnce() throws {
        var history = History()
        try history.buy("1", "levels", at: "2025-01-01T00:00:00.000Z")
        try history.buy("2", "levels", at: "2025-02-01T00:00:00.000Z", device: "tablet")
        try history.buy("3", "levels", original: "1", at: "2025-03-01T00:00:00.000Z", device: "laptop")
        #expect(history.rows(OwnershipProjection.self) == [["levels", "non_consumable", "1", "2025-01-01T00:00:00.000Z", nil]])
        try history.revoke("1")
        #expect(history.rows(OwnershipProjection.self).isEmpty, "revoking the purchase removes what it gave")
    }

    @Test("ownership: an auto-renewable expires at the latest non-revoked expiry of its original")
    func ownershipAutoRenewable() throws {
        var history = History()
        try history.buy("10", "pro", at: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")
        try history.buy("11", "pro", original: "10", at: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z")
        #expect(history.rows(OwnershipProjection.self).first?[4] == "2025-03-01T00:00:00.000Z")
        try history.revoke("11")
        #expect(history.rows(OwnershipProjection.self).first?[4] == "2025-02-01T00:00:00.000Z")
    }

    @Test("ownership: non-renewing products of a group run from the first stacked start to the last end")
    func ownershipNonRenewing() throws {
        var history = History()
        try history.buy("1", "gold.month", at: "2024-01-31T00:00:00.000Z")
        try history.buy("2", "gold.week", at: "2024-02-01T00:00:00.000Z")
        let rows = history.rows(OwnershipProjection.self)
        #expect(rows.contains(["gold.month", "non_renewing", "1", "2024-01-31T00:00:00.000Z", "2024-02-29T00:00:00.000Z"]))
        #expect(rows.contains(["gold.week", "non_renewing", "2", "2024-02-29T00:00:00.000Z", "2024-03-07T00:00:00.000Z"]))
    }

    @Test("balances: consumption at exactly the balance leaves zero; a later refund overdraws and is flagged")
    func balances() throws {
        var history = History()
        try history.buy("1", "coins", quantity: 3, at: "2025-01-01T00:00:00.000Z")
        history.append(try UserDecisions.consume(productId: "coins", quantity: 3, deviceId: "phone", catalog: catalog, on: history.state))
        #expect(history.rows(ConsumableBalancesProjection.self) == [["coins", "3", "3", "0", "false"]])
        try history.revoke("1")
        #expect(history.rows(ConsumableBalancesProjection.self) == [["coins", "0", "3", "-3", "true"]])
    }

    @Test("subscription periods: revoking the middle of a stack moves the later periods up")
    func periodsRestack() throws {
        var history = History()
        try history.buy("1", "gold.month", at: "2025-01-01T00:00:00.000Z")
        try history.buy("2", "gold.month", at: "2025-01-02T00:00:00.000Z")
        try history.buy("3", "gold.week", at: "2025-01-03T00:00:00.000Z")
        #expect(history.rows(SubscriptionPeriodsProjection.self).map { $0[5] } == [
            "2025-01-01T00:00:00.000Z", "2025-02-01T00:00:00.000Z", "2025-03-01T00:00:00.000Z",
        ])
        try history.revoke("2")
        let periods = history.rows(SubscriptionPeriodsProjection.self)
        #expect(periods.map { $0[0] } == ["1", "3"])
        #expect(periods[1][5] == "2025-02-01T00:00:00.000Z")
        #expect(periods[1][6] == "2025-02-08T00:00:00.000Z")
    }

    @Test("audit trail: purchases, renewals and refunds are money rows; restores and re-buys are not")
    func auditTrail() throws {
        var history = History()
        try history.buy("1", "levels", at: "2025-01-01T00:00:00.000Z", price: "2.99")
        try history.buy("2", "levels", at: "2025-02-01T00:00:00.000Z", price: "2.99")  // re-buy: a restore, no money
        try history.buy("10", "pro", at: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z", price: "4.99")
        try history.buy("11", "pro", original: "10", at: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z")
        try history.revoke("10")
        let rows = history.rows(AuditTrailProjection.self)
        let column = { (name: String) in AuditTrailProjection.columns.firstIndex { $0.name == name }! }
        let (event, transaction, price, revoked) = (column("event"), column("transaction_id"), column("price"), column("revoked"))
        #expect(rows.map { "\($0[event]!):\($0[transaction]!)" } == ["purchase:1", "purchase:10", "refund:10", "renewal:11"])
        #expect(rows.first { $0[transaction] == "1" }?[price] == "2.99")
        #expect(rows.filter { $0[transaction] == "10" }.allSatisfy { $0[revoked] == "true" }, "both rows of the refunded purchase say revoked")
        #expect(rows.allSatisfy { $0[column("environment")] == "production" })
        // occurred_at: the purchase date, or for the refund the refund date; recorded_at: when the ledger recorded each.
        let (occurred, recorded, position) = (column("occurred_at"), column("recorded_at"), column("position"))
        #expect(rows.map { "\($0[event]!):\($0[occurred]!)" } == [
            "purchase:2025-01-01T00:00:00.000Z", "purchase:2025-01-01T00:00:00.000Z", "refund:2025-06-01T00:00:00.000Z",
            "renewal:2025-02-01T00:00:00.000Z",
        ])
        let refund = try #require(rows.first { $0[event] == "refund" })
        let refundRecordedAt = Date(timeIntervalSince1970: 1_800_000_000 + Double(refund[position]!)!)
        #expect(refund[recorded] == LedgerJSON.formatTimestamp(refundRecordedAt))
    }

    @Test("deliveries and unfinished transactions follow the devices")
    func deliveriesAndUnfinished() throws {
        var history = History()
        try history.buy("1", "gold.month", at: "2025-01-01T00:00:00.000Z")
        try history.buy("2", "coins", at: "2025-01-01T00:00:00.000Z")
        history.append([PendingEvent(.transactionFinished(TransactionFinished(transactionId: "2", deviceId: "phone")))])
        history.append(UserDecisions.restoreNonRenewing(toDevice: "tablet", catalog: catalog, on: history.state).events)
        let deliveries = history.rows(DeviceDeliveriesProjection.self).map { "\($0[0]!):\($0[1]!):\($0[3]!)" }
        #expect(deliveries == ["phone:1:purchase", "phone:2:purchase", "tablet:1:subscription_restore"])
        #expect(history.rows(UnfinishedTransactionsProjection.self).map { $0[0] } == ["1"])
    }

    @Test("a repeated restore to the same device adds no delivery")
    func repeatedRestore() throws {
        var history = History()
        try history.buy("1", "gold.month", at: "2025-01-01T00:00:00.000Z")
        for _ in 0..<3 {
            history.append(UserDecisions.restoreNonRenewing(toDevice: "tablet", catalog: catalog, on: history.state).events)
        }
        #expect(history.rows(DeviceDeliveriesProjection.self).filter { $0[0] == "tablet" }.count == 1)
    }
}
