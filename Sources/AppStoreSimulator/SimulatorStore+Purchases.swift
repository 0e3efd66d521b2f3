import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Purchases, restores, refunds

    /// A test purchase at the simulator's current time.
    ///
    /// Buying a non-consumable (or free subscription) the user owns gives a new transaction pointing
    /// at the first, as StoreKit does, without a second charge. Buying an auto-renewable while a
    /// subscription of its group is active changes that subscription (see `changePlan`); buying the
    /// product it is on is refused until it expires or is cancelled.
    func purchase(userId: String, bundleId: String, productId: String, quantity: Int) throws -> Purchase {
        let (app, product) = try requireProduct(userId: userId, bundleId: bundleId, productId: productId)
        guard (1...10).contains(quantity) else { throw SimulatorError.badRequest("quantity must be from 1 to 10") }
        guard quantity == 1 || product.type == .consumable else {
            throw SimulatorError.badRequest("only consumables are bought in quantities; \(productId) is \(product.type.rawValue)")
        }
        let key = UserApp(userId: userId, bundleId: app.bundleId)
        materialize(key)
        let now = self.now
        switch product.type {
        case .autoRenewable:
            return try subscribe(key, to: product, in: app, at: now)
        case .nonConsumable, .freeSubscription:
            if let owned = originalPurchase(key, productId: productId) {
                return Purchase(transaction: record(restoreTransaction(of: owned, at: now)), change: nil, createdTransaction: true)
            }
            fallthrough
        case .consumable, .nonRenewing, .unknown:
            let id = takeTransactionId()
            let transaction = record(SimulatorTransaction(
                transactionId: id, originalTransactionId: id, userId: userId, bundleId: app.bundleId,
                productId: productId, productType: product.type, quantity: quantity,
                purchaseDate: now, originalPurchaseDate: now, expiresDate: nil, webOrderLineItemId: nil
            ))
            return Purchase(transaction: transaction, change: nil, createdTransaction: true)
        }
    }

    /// A StoreKit restore: a new transaction for each non-consumable and free subscription the user
    /// owns, pointing at its purchase, and one for each period of each auto-renewable, with the
    /// period's original transaction id, dates and `web_order_line_item_id` (nothing refunded is
    /// restored). Consumables and non-renewing subscriptions are not restored by StoreKit at all.
    func restore(userId: String, bundleId: String) throws -> [SimulatorTransaction] {
        try requireUser(userId)
        let app = try app(bundleId)
        let key = UserApp(userId: userId, bundleId: app.bundleId)
        materialize(key)
        let now = self.now
        let restorable = (transactionsByUser[key] ?? []).compactMap { transactions[$0] }.filter {
            guard $0.restoredTransactionId == nil, !$0.isRefunded else { return false }
            if $0.productType.isOwnedForever { return $0.transactionId == $0.originalTransactionId }
            return $0.productType == .autoRenewable
        }
        return restorable.map { original in
            original.productType == .autoRenewable
                ? record(restoredPeriod(original))
                : record(restoreTransaction(of: original, at: now))
        }
    }

    /// Support cancels (refunds) a transaction now; a subscription it belongs to stops renewing.
    func cancel(transactionId: String, reason: Int, percentage: Int? = nil) throws -> SimulatorTransaction {
        guard var transaction = transactions[transactionId] else {
            throw SimulatorError.notFound("no transaction '\(transactionId)'")
        }
        guard reason == 0 || reason == 1 else {
            throw SimulatorError.badRequest("reason is 0 (other) or 1 (a problem in the app)")
        }
        if let percentage, !(1...100_000).contains(percentage) {
            throw SimulatorError.badRequest("percentage is the refunded share in milliunits of a percent, 1 to 100000 (40000 is 40 %)")
        }
        if let source = transaction.sharedTransactionId {
            throw SimulatorError.badRequest("transaction \(transactionId) is a family member's copy: refund the buyer's transaction \(source)")
        }
        let key = UserApp(userId: transaction.userId, bundleId: transaction.bundleId)
        materialize(key)
        transaction = transactions[transactionId] ?? transaction
        guard transaction.cancellationDate == nil else {
            let what = transaction.isUpgraded ? "ended by an upgrade" : "cancelled"
            throw SimulatorError.conflict("transaction \(transactionId) was \(what) already")
        }
        let now = self.now
        transaction.cancellationDate = now
        transaction.cancellationReason = reason
        transaction.revocationPercentage = percentage == 100_000 ? nil : percentage
        transactions[transactionId] = transaction
        if var subscription = subscriptions[transaction.originalTransactionId], subscription.stoppedAt == nil {
            subscription.stoppedAt = now
            subscriptions[transaction.originalTransactionId] = subscription
        }
        notify("REFUND", about: transaction)
        for copy in transactions.values where copy.sharedTransactionId == transactionId {
            notify("REVOKE", about: copy)
        }
        return transaction
    }

    /// The app finishes a transaction. A finished consumable is left out of every receipt issued
    /// afterwards (and of `latest_receipt_info`); other types stay. Finishing twice changes nothing.
    func finish(transactionId: String) throws -> SimulatorTransaction {
        guard var transaction = transactions[transactionId] else {
            throw SimulatorError.notFound("no transaction '\(transactionId)'")
        }
        if transaction.finishedAt == nil {
            transaction.finishedAt = now
            transactions[transactionId] = transaction
        }
        return transaction
    }

    /// The user's transactions in the app, renewals up to now included.
    func transactions(userId: String, bundleId: String) throws -> [SimulatorTransaction] {
        try requireUser(userId)
        _ = try app(bundleId)
        let key = UserApp(userId: userId, bundleId: bundleId)
        materialize(key)
        return (transactionsByUser[key] ?? []).compactMap { transactions[$0] }
    }

    /// The payload of an app receipt issued now: every transaction of the user in the app but the
    /// consumables the app has finished.
    func appReceiptPayload(userId: String, bundleId: String) throws -> SimulatorReceiptPayload {
        let listed = try transactions(userId: userId, bundleId: bundleId).filter { !$0.leavesReceipts }
        return SimulatorReceiptPayload(
            kind: .app, environment: environment, bundleId: bundleId, userId: userId,
            transactionIds: listed.map(\.transactionId), issuedAt: now.milliseconds
        )
    }

    /// The payload of an old-style receipt for one transaction.
    func transactionReceiptPayload(_ transaction: SimulatorTransaction) -> SimulatorReceiptPayload {
        SimulatorReceiptPayload(
            kind: .transaction, environment: environment, bundleId: transaction.bundleId, userId: transaction.userId,
            transactionIds: [transaction.transactionId], issuedAt: now.milliseconds
        )
    }

    // MARK: Internals: restores

    /// The user's own first purchase of `productId` (not a family member's), not refunded.
    func originalPurchase(_ key: UserApp, productId: String) -> SimulatorTransaction? {
        (transactionsByUser[key] ?? []).lazy.compactMap { self.transactions[$0] }.first {
            $0.productId == productId && $0.transactionId == $0.originalTransactionId && $0.cancellationDate == nil
                && $0.ownership == .purchased
        }
    }

    /// A non-consumable's restore: a new transaction now, pointing at the purchase.
    func restoreTransaction(of original: SimulatorTransaction, at now: Date) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: original.transactionId, userId: original.userId,
            bundleId: original.bundleId, productId: original.productId, productType: original.productType, quantity: 1,
            purchaseDate: now, originalPurchaseDate: original.purchaseDate, expiresDate: nil, webOrderLineItemId: nil,
            ownership: original.ownership, restoredTransactionId: original.transactionId
        )
    }

    /// An auto-renewable period's restore: a new transaction id, everything else the period's own,
    /// its `web_order_line_item_id` included (which is how a restore is told from a renewal).
    func restoredPeriod(_ period: SimulatorTransaction) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: period.originalTransactionId, userId: period.userId,
            bundleId: period.bundleId, productId: period.productId, productType: period.productType, quantity: period.quantity,
            purchaseDate: period.purchaseDate, originalPurchaseDate: period.originalPurchaseDate, expiresDate: period.expiresDate,
            webOrderLineItemId: period.webOrderLineItemId, cancellationDate: period.cancellationDate, cancellationReason: nil,
            ownership: period.ownership, subscriptionGroupIdentifier: period.subscriptionGroupIdentifier,
            isTrialPeriod: period.isTrialPeriod, isInIntroOfferPeriod: period.isInIntroOfferPeriod, isUpgraded: period.isUpgraded,
            restoredTransactionId: period.transactionId
        )
    }

    // MARK: Internals: records and checks

    @discardableResult
    func record(_ transaction: SimulatorTransaction) -> SimulatorTransaction {
        var transaction = transaction
        transaction.storefront = storefronts[transaction.userId] ?? "USA"
        transactions[transaction.transactionId] = transaction
        transactionsByUser[UserApp(userId: transaction.userId, bundleId: transaction.bundleId), default: []].append(transaction.transactionId)
        notifyNew(transaction)
        return transaction
    }

    func requireUser(_ userId: String) throws {
        guard users.contains(userId) else {
            throw SimulatorError.notFound("no test user '\(userId)': create it with POST /admin/users {\"userId\": \"\(userId)\"}")
        }
    }

    func requireProduct(userId: String, bundleId: String, productId: String) throws -> (App, SimulatedProduct) {
        try requireUser(userId)
        let app = try app(bundleId)
        guard let product = app.products[productId] else {
            throw SimulatorError.notFound("app '\(bundleId)' has no product '\(productId)': define it with PUT /admin/apps/\(bundleId)/products/\(productId)")
        }
        return (app, product)
    }

    /// Groups, levels and intro offers are for auto-renewables; Family Sharing for non-consumables and auto-renewables.
    static func checkSubscriptionOptions(_ product: SimulatedProduct) throws {
        if product.type != .autoRenewable {
            guard product.group == nil, product.level == nil, product.introOffer == nil else {
                throw SimulatorError.badRequest("group, level and introOffer are for auto_renewable products only")
            }
        }
        if let group = product.group { try requireIdentifier(group, "group") }
        if let level = product.level {
            guard product.group != nil else { throw SimulatorError.badRequest("level ranks a product within its group: give group too") }
            guard (1...100).contains(level) else { throw SimulatorError.badRequest("level is from 1 (the highest level of service) to 100") }
        }
        if let offer = product.introOffer, !(1...12).contains(offer.periods) {
            throw SimulatorError.badRequest("introOffer.periods is from 1 to 12")
        }
        if product.familyShareable, product.type != .nonConsumable, product.type != .autoRenewable {
            throw SimulatorError.badRequest("only non_consumable and auto_renewable products can be family-shareable")
        }
    }

    func takeTransactionId() -> String {
        defer { nextTransactionId += 1 }
        return String(nextTransactionId)
    }

    func takeWebOrderId() -> String {
        defer { nextWebOrderId += 1 }
        return String(nextWebOrderId)
    }

    static func requireIdentifier(_ value: String, _ what: String) throws {
        let allowed = value.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 32 && $0 != "/" && $0 != "?" && $0 != "#" }
        guard !value.isEmpty, value.count <= 200, allowed else {
            throw SimulatorError.badRequest("\(what) '\(value)' must be 1 to 200 printable characters without spaces, '/', '?' or '#'")
        }
    }

    static let sellableTypes = ProductType.allCases.filter { $0 != .unknown }.map(\.rawValue).joined(separator: ", ")

    static func randomSecret() -> String {
        (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255)
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    static func iso(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
