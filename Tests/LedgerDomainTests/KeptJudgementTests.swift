import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

/// A judgement that looks again only at what changed must give, after every event, what judging
/// every transaction from scratch gives: over random streams of every fact a user's stream holds,
/// with the catalog, the rules and the user's currency changing along the way.
@Suite struct KeptJudgementTests {
    /// The same seed, the same stream (`SeededGenerator`, shared with the schedule's tests).
    struct Random {
        var generator: SeededGenerator
        init(seed: UInt64) { generator = SeededGenerator(seed: seed) }
        mutating func below(_ bound: Int) -> Int { Int(generator.next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    static let definitions: [Product] = [
        try! Product(productId: "coins", type: .consumable, prices: ["USD": "0.99", "EUR": "1.09"]),
        try! Product(productId: "gems", type: .consumable, prices: ["USD": "4.99"]),
        try! Product(productId: "levels", type: .nonConsumable, prices: ["USD": "2.99", "EUR": "2.99"]),
        try! Product(productId: "news", type: .freeSubscription, prices: ["USD": "0"]),
        try! Product(productId: "pro", type: .autoRenewable, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "pro",
                     prices: ["USD": "4.99"]),
        try! Product(productId: "pro.year", type: .autoRenewable, duration: try! ISODuration(parsing: "P1Y"), subscriptionGroup: "pro",
                     prices: ["USD": "39.99", "EUR": "44.99"]),
        try! Product(productId: "gold", type: .nonRenewing, duration: try! ISODuration(parsing: "P1M"), subscriptionGroup: "gold",
                     prices: ["USD": "3.99"]),
    ]
    /// Products a stream may name; "mystery" the catalog never defines.
    static let productIds = definitions.map(\.productId) + ["mystery"]

    /// One random stream of `length` events; checks the judgement after each.
    func check(seed: UInt64, length: Int) throws {
        var random = Random(seed: seed)
        var catalog = ProductCatalog()
        var state = UserLedger()
        var position: Int64 = 0
        var ids: [String] = []
        var fieldsOf: [String: [String: String]] = [:]
        var lineItems: [String] = []
        var rules = TransactionClassifier.Rules.current
        let start = Date(timeIntervalSince1970: 1_735_689_600)

        func newFields(_ id: String) -> [String: String] {
            let product = random.pick(Self.productIds)
            var fields = ["transaction_id": id, "product_id": product, "quantity": String(1 + random.below(3)),
                          "purchase_date_ms": String(Int64(start.timeIntervalSince1970 * 1000) + Int64(random.below(1_000)) * 3_600_000)]
            // Often a transaction of an earlier original (a renewal, a restore, a chain).
            fields["original_transaction_id"] = !ids.isEmpty && random.chance(40) ? random.pick(ids) : id
            if product.hasPrefix("pro") || (product == "mystery" && random.chance(50)) {
                fields["expires_date_ms"] = String(Int64(fields["purchase_date_ms"]!)! + 30 * 86_400_000)
                if !lineItems.isEmpty && random.chance(25) {
                    fields["web_order_line_item_id"] = random.pick(lineItems)
                } else if random.chance(90) {
                    let item = "w\(id)"
                    lineItems.append(item)
                    fields["web_order_line_item_id"] = item
                }
            }
            if random.chance(10) { fields["is_trial_period"] = "true" }
            if random.chance(5) { fields["is_in_intro_offer_period"] = "true" }
            if random.chance(8) { fields["in_app_ownership_type"] = "FAMILY_SHARED" }
            if random.chance(5) { fields["cancellation_date_ms"] = String(Int64(fields["purchase_date_ms"]!)! + 86_400_000) }
            return fields
        }

        /// Apple's fields for a transaction seen before, changed as a later answer changes them.
        func changedFields(_ id: String) -> [String: String] {
            var fields = fieldsOf[id]!
            let purchased = Int64(fields["purchase_date_ms"] ?? "1735689600000")!
            fields["purchase_date_ms"] = String(purchased)
            switch random.below(5) {
            case 0:
                fields["cancellation_date_ms"] = String(purchased + 7_200_000)
                fields["cancellation_reason"] = random.chance(50) ? "1" : "0"
            case 1:
                fields["is_upgraded"] = "true"
                fields["cancellation_date_ms"] = String(purchased + 3_600_000)
            case 2:
                fields["expires_date_ms"] = String(purchased + Int64(random.below(60)) * 86_400_000)
            case 3:
                fields["original_transaction_id"] = random.pick(ids)
            default:
                fields["product_id"] = random.pick(Self.productIds)
            }
            return fields
        }

        func observation(_ id: String, _ fields: [String: String], status: Int = 0) -> UserEvent {
            fieldsOf[id] = fields
            return .appStoreTransactionObserved(AppStoreTransactionObserved(
                transactionId: id, environment: random.chance(10) ? .sandbox : .production, fields: fields, receiptHash: "r",
                deviceId: "device-\(random.below(3))", answeredAt: start.addingTimeInterval(Double(position)), status: status
            ))
        }

        func events() -> [UserEvent] {
            let at = start.addingTimeInterval(Double(position) * 60)
            switch random.below(100) {
            case 0..<35:
                // A post and what it brought: new transactions, and some seen before with other fields.
                var brought: [UserEvent] = []
                for _ in 0..<(1 + random.below(3)) {
                    if !ids.isEmpty && random.chance(25) {
                        let id = random.pick(ids)
                        brought.append(observation(id, changedFields(id), status: random.chance(10) ? 21006 : 0))
                    } else {
                        let id = "\(1_000 + ids.count)"
                        ids.append(id)
                        brought.append(observation(id, newFields(id)))
                    }
                }
                let currency: String? = random.chance(70) ? (random.chance(85) ? "USD" : "EUR") : nil
                let post = UserEvent.receiptPosted(ReceiptPosted(
                    receiptHash: "r\(position)", answerHash: "a\(position)", deviceId: "device-\(random.below(3))", environment: .production,
                    status: 0, answeredAt: at, price: currency != nil && random.chance(70) ? random.pick(["0.99", "4.99", "1.09"]) : nil,
                    currency: currency, transactionIds: []
                ))
                return [post] + brought
            case 35..<42:
                // An observation without a post of its own.
                let id = "\(1_000 + ids.count)"
                ids.append(id)
                return [observation(id, newFields(id))]
            case 42..<50:
                let id = ids.isEmpty || random.chance(10) ? "unseen-\(position)" : random.pick(ids)
                return [.purchaseRevoked(PurchaseRevoked(transactionId: id, revokedAt: at, reason: "support"))]
            case 50..<54:
                guard !ids.isEmpty else { return [] }
                let id = random.pick(ids)
                return [.subscriptionExpiryReported(SubscriptionExpiryReported(transactionId: id, reportedAt: at, status: 21006))]
            case 54..<62:
                // Version-1 verdicts.
                let id = "\(1_000 + ids.count)"
                ids.append(id)
                fieldsOf[id] = ["transaction_id": id]
                let product = random.pick(Self.productIds)
                switch random.below(3) {
                case 0:
                    return [.purchaseRecorded(PurchaseRecorded(
                        transactionId: id, originalTransactionId: id, productId: product,
                        productType: random.pick(ProductType.allCases), quantity: 1 + random.below(2), purchaseDate: at,
                        expiresDate: product.hasPrefix("pro") ? at.addingTimeInterval(86_400 * 30) : nil, environment: .production,
                        deviceId: "device-0", price: random.chance(50) ? "1.99" : nil, currency: random.chance(50) ? "EUR" : nil, receiptHash: "r"
                    ))]
                case 1:
                    return [.subscriptionRenewed(SubscriptionRenewed(
                        transactionId: id, originalTransactionId: ids.isEmpty ? id : random.pick(ids), productId: "pro", purchaseDate: at,
                        expiresDate: at.addingTimeInterval(86_400 * 30), environment: .production, price: "4.99", currency: "USD",
                        receiptHash: "r"
                    ))]
                default:
                    return [.purchaseRestored(PurchaseRestored(
                        transactionId: id, originalTransactionId: random.pick(ids), productId: product, deviceId: "device-1",
                        purchaseDate: at, environment: .production, receiptHash: "r"
                    ))]
                }
            case 62..<70:
                guard !ids.isEmpty else { return [] }
                let id = random.pick(ids)
                return [.transactionFinished(TransactionFinished(transactionId: id, deviceId: "device-0"))]
            case 70..<76:
                return [.itemConsumed(ItemConsumed(productId: "coins", quantity: 1, deviceId: "device-0"))]
            case 76..<80:
                return [.subscriptionRestoredToDevice(SubscriptionRestoredToDevice(deviceId: "device-9", transactionIds: Array(ids.suffix(2))))]
            default:
                return [.deviceRegistered(DeviceRegistered(deviceId: "device-\(random.below(5))"))]
            }
        }

        for step in 0..<length {
            if random.chance(4) {
                // The catalog changes: a first definition, or a price or type moved.
                position += 1
                var product = random.pick(Self.definitions)
                if random.chance(30) {
                    product = try Product(productId: product.productId, type: product.type, duration: product.duration,
                                          subscriptionGroup: product.subscriptionGroup, prices: ["USD": "9.99"])
                }
                catalog.apply(ProductDefined(product: product), position: position)
                state.classify(by: catalog, rules: rules)
            } else if random.chance(1) {
                rules = rules == .current ? .version1 : .current
                state.classify(by: catalog, rules: rules)
            } else {
                for event in events() {
                    position += 1
                    state.apply(event, version: state.version + 1, context: .init(position: position, recordedAt: start))
                }
            }
            let fresh = TransactionClassifier.classify(state.facts, catalog: catalog, rules: rules)
            let kept = state.transactionsInOrder
            if kept != fresh {
                let difference = zip(kept, fresh).first { $0 != $1 }
                    .map { "kept \($0.0.transactionId) \($0.0.kind) revoked \($0.0.isRevoked) restores \($0.0.restores ?? "-") price \($0.0.price ?? "-") \($0.0.productType), "
                        + "from scratch \($0.1.transactionId) \($0.1.kind) revoked \($0.1.isRevoked) restores \($0.1.restores ?? "-") price \($0.1.price ?? "-") \($0.1.productType)" }
                    ?? "\(kept.count) transactions kept, \(fresh.count) from scratch"
                Issue.record("seed \(seed), step \(step): the kept judgement differs from judging from scratch: \(difference)")
                return
            }
            if let problem = Self.perProductAnswersDiffer(state, kept, catalog: catalog) {
                Issue.record("seed \(seed), step \(step): \(problem)")
                return
            }
        }
    }

    /// Questions about one product look only at that product's transactions
    /// (`TransactionFacts.orderOfProduct`); they must answer as a scan of the whole history does.
    static func perProductAnswersDiffer(_ state: UserLedger, _ transactions: [UserLedger.Transaction], catalog: ProductCatalog) -> String? {
        for productId in productIds {
            let all = transactions.filter { $0.productId == productId }
            let purchased = all.filter { $0.kind == .purchase && !$0.isRevoked }.reduce(0) { $0 + $1.quantity }
            if state.balance(of: productId) != purchased - state.consumed[productId, default: 0] {
                return "balance of \(productId): \(state.balance(of: productId)), a scan gives \(purchased - state.consumed[productId, default: 0])"
            }
            let owner = all.first { $0.grantsOwnership && !$0.isRevoked && $0.productType.isOwnedForever }
            if state.ownership(of: productId) != owner {
                return "owner of \(productId): \(state.ownership(of: productId)?.transactionId ?? "-"), a scan gives \(owner?.transactionId ?? "-")"
            }
        }
        let purchases = transactions.compactMap { transaction -> NonRenewingPurchase? in
            guard transaction.kind == .purchase, !transaction.isRevoked,
                  let product = catalog.product(transaction.productId, asOf: transaction.position),
                  product.type == .nonRenewing, let duration = product.duration
            else { return nil }
            return NonRenewingPurchase(transactionId: transaction.transactionId, productId: transaction.productId,
                                       group: product.subscriptionGroup, purchaseDate: transaction.purchaseDate, duration: duration)
        }
        let periods = state.nonRenewingPeriods(catalog: catalog)
        if periods != NonRenewingSchedule.periods(of: purchases) {
            return "non-renewing periods: \(periods.map(\.transactionId)), a scan gives \(NonRenewingSchedule.periods(of: purchases).map(\.transactionId))"
        }
        return nil
    }

    @Test(arguments: 0..<40)
    func keptJudgementEqualsJudgingFromScratch(seed: UInt64) throws {
        try check(seed: seed &* 7919 &+ 17, length: 300)
    }

    /// A state copied (as a kept fold is handed out) and then moved on by two readers judges each
    /// copy on its own.
    @Test func copiesJudgeApart() throws {
        let catalog = ProductCatalog(products: Self.definitions)
        var state = UserLedger()
        func observed(_ id: String, _ product: String, original: String? = nil) -> UserEvent {
            .appStoreTransactionObserved(AppStoreTransactionObserved(
                transactionId: id, environment: .production,
                fields: ["transaction_id": id, "original_transaction_id": original ?? id, "product_id": product, "purchase_date_ms": "1735689600000"],
                receiptHash: "r", deviceId: "phone", answeredAt: Date(timeIntervalSince1970: 0), status: 0
            ))
        }
        state.apply(observed("1", "levels"), version: 1, context: .init(position: 1, recordedAt: nil))
        state.classify(by: catalog)
        var first = state
        var second = state
        first.apply(observed("2", "levels"), version: 2, context: .init(position: 2, recordedAt: nil))
        second.apply(.purchaseRevoked(PurchaseRevoked(transactionId: "1", revokedAt: Date(timeIntervalSince1970: 0), reason: "x")),
                     version: 2, context: .init(position: 2, recordedAt: nil))
        #expect(first.transactions["2"]?.kind == .restore)
        #expect(first.transactions["1"]?.isRevoked == false)
        #expect(second.transactions["1"]?.isRevoked == true)
        #expect(second.transactions["2"] == nil)
        #expect(state.transactions["1"]?.isRevoked == false)
        #expect(first.transactionsInOrder == TransactionClassifier.classify(first.facts, catalog: catalog))
        #expect(second.transactionsInOrder == TransactionClassifier.classify(second.facts, catalog: catalog))
    }
}
