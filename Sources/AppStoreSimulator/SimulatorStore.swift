import AppStore
import Foundation
import LedgerDomain

/// The simulator's App Store: apps, products, test users, transactions and its clock, in memory.
///
/// Renewals are not scheduled: they are derived from the clock whenever someone looks (a verify, an
/// admin read), so advancing the clock by an hour and verifying shows every renewal of that hour.
/// Renewal n of a subscription bought at `start` is dated `start + n × period` and exists once the
/// clock has passed that date, for n ≤ 6 in the sandbox, unless support cancelled the subscription first.
actor SimulatorStore {
    /// Renewals in the sandbox stop after this many, as Apple's does.
    static let sandboxRenewalLimit = 6

    struct App: Sendable {
        var bundleId: String
        var sharedSecret: String
        var products: [String: SimulatedProduct]
    }

    private struct UserApp: Hashable {
        let userId: String
        let bundleId: String
    }

    private struct Subscription {
        let originalTransactionId: String
        let productId: String
        let duration: SubscriptionDuration
        let start: Date
        /// Index n holds period n (0 = the purchase).
        var transactionIds: [String]
        /// When support cancelled a transaction of it: no renewal starts after this.
        var stoppedAt: Date?
    }

    /// A subscription as a verify answer needs it.
    struct SubscriptionView: Sendable {
        let originalTransactionId: String
        let productId: String
        let latest: SimulatorTransaction
        let willRenew: Bool
        let isActive: Bool
    }

    /// Everything a `verifyReceipt` answer for one receipt is rendered from, read at one instant.
    struct VerificationView: Sendable {
        let now: Date
        let sharedSecret: String
        /// The receipt's own transactions, in their current state (refunds show).
        let covered: [SimulatorTransaction]
        /// Every transaction of the user in the app, renewals included, by purchase date.
        let all: [SimulatorTransaction]
        let subscriptions: [SubscriptionView]
        /// The first purchase in the app (the app receipt's `original_purchase_date`).
        let firstPurchase: Date?
    }

    let environment: StoreEnvironment
    private var clockOffset: TimeInterval = 0
    private var apps: [String: App] = [:]
    private var users: Set<String> = []
    private var transactions: [String: SimulatorTransaction] = [:]
    private var transactionsByUser: [UserApp: [String]] = [:]
    private var subscriptions: [String: Subscription] = [:]
    private var subscriptionsByUser: [UserApp: [String]] = [:]
    private var nextTransactionId: Int64
    private var nextWebOrderId: Int64
    private var nextUserNumber = 1
    private var faults = SimulatorFaults()

    init(environment: StoreEnvironment) {
        self.environment = environment
        // Ids start from the wall clock, so a restarted simulator does not reuse the last run's ids
        // (a ledger that saw them would take new purchases for duplicates).
        let base = 1_000_000_000_000_000 + (Int64(Date().timeIntervalSince1970 * 1000) % 100_000_000_000) * 1_000
        self.nextTransactionId = base
        self.nextWebOrderId = base
    }

    // MARK: Clock

    var now: Date { Date().addingTimeInterval(clockOffset) }

    var offsetSeconds: TimeInterval { clockOffset }

    /// Moves the clock forward; it never goes back, so that dates already issued stay in the past.
    func advance(seconds: TimeInterval) throws -> Date {
        guard seconds >= 0, seconds.isFinite else {
            throw SimulatorError.badRequest("the clock only moves forward: give a number of seconds or minutes of 0 or more")
        }
        clockOffset += seconds
        return now
    }

    // MARK: Apps, products, users

    @discardableResult
    func putApp(bundleId: String, sharedSecret: String?) throws -> App {
        try Self.requireIdentifier(bundleId, "bundle id")
        var app = apps[bundleId] ?? App(bundleId: bundleId, sharedSecret: Self.randomSecret(), products: [:])
        if let sharedSecret {
            guard !sharedSecret.isEmpty else { throw SimulatorError.badRequest("sharedSecret must not be empty") }
            app.sharedSecret = sharedSecret
        }
        apps[bundleId] = app
        return app
    }

    func app(_ bundleId: String) throws -> App {
        guard let app = apps[bundleId] else {
            throw SimulatorError.notFound("no app '\(bundleId)': define a product with PUT /admin/apps/\(bundleId)/products/{productId}")
        }
        return app
    }

    /// Defines or replaces a product; the app is created (with a random shared secret) if it is new.
    func putProduct(bundleId: String, _ product: SimulatedProduct) throws -> SimulatedProduct {
        try Self.requireIdentifier(product.productId, "product id")
        switch product.type {
        case .unknown:
            throw SimulatorError.badRequest("type must be one of \(Self.sellableTypes)")
        case .autoRenewable, .nonRenewing:
            guard product.duration != nil else {
                throw SimulatorError.badRequest("a \(product.type.rawValue) product needs a duration: one of \(SubscriptionDuration.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        case .consumable, .nonConsumable, .freeSubscription:
            guard product.duration == nil else {
                throw SimulatorError.badRequest("a \(product.type.rawValue) product has no duration: leave it out")
            }
        }
        var app = try apps[bundleId] ?? putApp(bundleId: bundleId, sharedSecret: nil)
        app.products[product.productId] = product
        apps[bundleId] = app
        return product
    }

    /// Creates a test user; without an id one is made up (`user-1`, `user-2`, …).
    func createUser(_ requested: String?) throws -> String {
        var userId: String
        if let requested {
            try Self.requireIdentifier(requested, "user id")
            guard !users.contains(requested) else { throw SimulatorError.conflict("test user '\(requested)' exists already") }
            userId = requested
        } else {
            userId = "user-\(nextUserNumber)"
            while users.contains(userId) {
                nextUserNumber += 1
                userId = "user-\(nextUserNumber)"
            }
            nextUserNumber += 1
        }
        users.insert(userId)
        return userId
    }

    // MARK: Purchases, restores, refunds

    /// A test purchase at the simulator's current time.
    ///
    /// Buying a non-consumable (or free subscription) the user owns gives a new transaction pointing
    /// at the first, as StoreKit does, without a second charge. An active subscription cannot be
    /// bought again until it expires or is cancelled.
    func purchase(userId: String, bundleId: String, productId: String, quantity: Int) throws -> SimulatorTransaction {
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
            let duration = product.duration ?? .oneMonth
            if let active = subscriptionViews(key).first(where: { $0.productId == productId && $0.isActive }) {
                throw SimulatorError.conflict(
                    "\(userId) is subscribed to \(productId) until \(active.latest.expiresDate.map(Self.iso) ?? "?"): advance the clock past it or cancel transaction \(active.latest.transactionId)"
                )
            }
            let id = takeTransactionId()
            let transaction = SimulatorTransaction(
                transactionId: id, originalTransactionId: id, userId: userId, bundleId: app.bundleId,
                productId: productId, productType: product.type, quantity: 1,
                purchaseDate: now, originalPurchaseDate: now,
                expiresDate: duration.periodStart(1, from: now, in: environment),
                webOrderLineItemId: takeWebOrderId(), cancellationDate: nil, cancellationReason: nil
            )
            record(transaction)
            subscriptions[id] = Subscription(originalTransactionId: id, productId: productId, duration: duration, start: now, transactionIds: [id])
            subscriptionsByUser[key, default: []].append(id)
            return transaction
        case .nonConsumable, .freeSubscription:
            if let owned = originalPurchase(key, productId: productId) {
                return record(restoreTransaction(of: owned, at: now))
            }
            fallthrough
        case .consumable, .nonRenewing, .unknown:
            let id = takeTransactionId()
            return record(SimulatorTransaction(
                transactionId: id, originalTransactionId: id, userId: userId, bundleId: app.bundleId,
                productId: productId, productType: product.type, quantity: quantity,
                purchaseDate: now, originalPurchaseDate: now, expiresDate: nil, webOrderLineItemId: nil,
                cancellationDate: nil, cancellationReason: nil
            ))
        }
    }

    /// A StoreKit restore: a new transaction for each non-consumable and free subscription the user
    /// owns (not refunded). Auto-renewables restore through the refreshed app receipt, with no new
    /// transaction; consumables and non-renewing subscriptions are not restored by StoreKit at all.
    func restore(userId: String, bundleId: String) throws -> [SimulatorTransaction] {
        try requireUser(userId)
        let app = try app(bundleId)
        let key = UserApp(userId: userId, bundleId: app.bundleId)
        let now = self.now
        let originals = (transactionsByUser[key] ?? []).compactMap { transactions[$0] }.filter {
            $0.productType.isOwnedForever && $0.transactionId == $0.originalTransactionId && $0.cancellationDate == nil
        }
        return originals.map { record(restoreTransaction(of: $0, at: now)) }
    }

    /// Support cancels (refunds) a transaction now; a subscription it belongs to stops renewing.
    func cancel(transactionId: String, reason: Int) throws -> SimulatorTransaction {
        guard var transaction = transactions[transactionId] else {
            throw SimulatorError.notFound("no transaction '\(transactionId)'")
        }
        guard reason == 0 || reason == 1 else {
            throw SimulatorError.badRequest("reason is 0 (other) or 1 (a problem in the app)")
        }
        let key = UserApp(userId: transaction.userId, bundleId: transaction.bundleId)
        materialize(key)
        transaction = transactions[transactionId] ?? transaction
        guard transaction.cancellationDate == nil else {
            throw SimulatorError.conflict("transaction \(transactionId) was cancelled already")
        }
        let now = self.now
        transaction.cancellationDate = now
        transaction.cancellationReason = reason
        transactions[transactionId] = transaction
        if var subscription = subscriptions[transaction.originalTransactionId], subscription.stoppedAt == nil {
            subscription.stoppedAt = now
            subscriptions[transaction.originalTransactionId] = subscription
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

    /// The payload of an app receipt issued now: every transaction of the user in the app.
    func appReceiptPayload(userId: String, bundleId: String) throws -> SimulatorReceiptPayload {
        let all = try transactions(userId: userId, bundleId: bundleId)
        return SimulatorReceiptPayload(
            kind: .app, environment: environment, bundleId: bundleId, userId: userId,
            transactionIds: all.map(\.transactionId), issuedAt: now.milliseconds
        )
    }

    /// The payload of an old-style receipt for one transaction.
    func transactionReceiptPayload(_ transaction: SimulatorTransaction) -> SimulatorReceiptPayload {
        SimulatorReceiptPayload(
            kind: .transaction, environment: environment, bundleId: transaction.bundleId, userId: transaction.userId,
            transactionIds: [transaction.transactionId], issuedAt: now.milliseconds
        )
    }

    // MARK: Verification

    /// What a verify of `payload` answers from; `nil` when the receipt names an app or user this
    /// simulator does not know (it was signed by a simulator with the same key but other state).
    func verificationView(for payload: SimulatorReceiptPayload) -> VerificationView? {
        guard let app = apps[payload.bundleId], users.contains(payload.userId) else { return nil }
        let key = UserApp(userId: payload.userId, bundleId: payload.bundleId)
        materialize(key)
        let all = (transactionsByUser[key] ?? []).compactMap { transactions[$0] }
        let covered = payload.transactionIds.compactMap { transactions[$0] }
        guard covered.count == payload.transactionIds.count else { return nil }
        return VerificationView(
            now: now,
            sharedSecret: app.sharedSecret,
            covered: covered,
            all: all.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) },
            subscriptions: subscriptionViews(key),
            firstPurchase: all.map(\.purchaseDate).min()
        )
    }

    /// Product types of a bundle, to tell whether a receipt covers an auto-renewable.
    func products(bundleId: String) throws -> [SimulatedProduct] {
        try app(bundleId).products.values.sorted { $0.productId < $1.productId }
    }

    // MARK: Faults

    func setFaults(_ faults: SimulatorFaults) throws -> SimulatorFaults {
        guard faults.failNext >= 0, faults.latencyMilliseconds >= 0, faults.latencyMilliseconds <= 60_000 else {
            throw SimulatorError.badRequest("failNext must be 0 or more and latencyMilliseconds from 0 to 60000")
        }
        guard faults.failNext == 0 || faults.failStatus != 0 else {
            throw SimulatorError.badRequest("failStatus must be a non-zero status such as 21005")
        }
        self.faults = faults
        return faults
    }

    var currentFaults: SimulatorFaults { faults }

    /// The fault for one verify call: the status to answer instead (counting it down) and the latency.
    func takeFault() -> (status: Int?, isRetryable: Bool, latencyMilliseconds: Int) {
        if faults.failNext > 0 {
            faults.failNext -= 1
            return (faults.failStatus, faults.isRetryable, faults.latencyMilliseconds)
        }
        return (nil, false, faults.latencyMilliseconds)
    }

    // MARK: Internals

    private func materialize(_ key: UserApp) {
        let now = self.now
        for originalId in subscriptionsByUser[key] ?? [] {
            guard var subscription = subscriptions[originalId], let first = transactions[originalId] else { continue }
            var changed = false
            while environment == .production || subscription.transactionIds.count <= Self.sandboxRenewalLimit {
                let index = subscription.transactionIds.count
                let start = subscription.duration.periodStart(index, from: subscription.start, in: environment)
                guard start <= now, subscription.stoppedAt.map({ start < $0 }) ?? true else { break }
                let renewal = SimulatorTransaction(
                    transactionId: takeTransactionId(), originalTransactionId: originalId, userId: first.userId,
                    bundleId: first.bundleId, productId: first.productId, productType: .autoRenewable, quantity: 1,
                    purchaseDate: start, originalPurchaseDate: subscription.start,
                    expiresDate: subscription.duration.periodStart(index + 1, from: subscription.start, in: environment),
                    webOrderLineItemId: takeWebOrderId(), cancellationDate: nil, cancellationReason: nil
                )
                record(renewal)
                subscription.transactionIds.append(renewal.transactionId)
                changed = true
            }
            if changed { subscriptions[originalId] = subscription }
        }
    }

    private func subscriptionViews(_ key: UserApp) -> [SubscriptionView] {
        let now = self.now
        return (subscriptionsByUser[key] ?? []).compactMap { originalId in
            guard let subscription = subscriptions[originalId],
                  let latestId = subscription.transactionIds.last, let latest = transactions[latestId]
            else { return nil }
            let renewalsLeft = environment == .production || subscription.transactionIds.count <= Self.sandboxRenewalLimit
            return SubscriptionView(
                originalTransactionId: originalId,
                productId: subscription.productId,
                latest: latest,
                willRenew: subscription.stoppedAt == nil && renewalsLeft,
                isActive: latest.cancellationDate == nil && (latest.expiresDate ?? .distantPast) > now
            )
        }
    }

    private func originalPurchase(_ key: UserApp, productId: String) -> SimulatorTransaction? {
        (transactionsByUser[key] ?? []).lazy.compactMap { self.transactions[$0] }.first {
            $0.productId == productId && $0.transactionId == $0.originalTransactionId && $0.cancellationDate == nil
        }
    }

    private func restoreTransaction(of original: SimulatorTransaction, at now: Date) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: original.transactionId, userId: original.userId,
            bundleId: original.bundleId, productId: original.productId, productType: original.productType, quantity: 1,
            purchaseDate: now, originalPurchaseDate: original.purchaseDate, expiresDate: nil, webOrderLineItemId: nil,
            cancellationDate: nil, cancellationReason: nil
        )
    }

    @discardableResult
    private func record(_ transaction: SimulatorTransaction) -> SimulatorTransaction {
        transactions[transaction.transactionId] = transaction
        transactionsByUser[UserApp(userId: transaction.userId, bundleId: transaction.bundleId), default: []].append(transaction.transactionId)
        return transaction
    }

    private func requireUser(_ userId: String) throws {
        guard users.contains(userId) else {
            throw SimulatorError.notFound("no test user '\(userId)': create it with POST /admin/users {\"userId\": \"\(userId)\"}")
        }
    }

    private func requireProduct(userId: String, bundleId: String, productId: String) throws -> (App, SimulatedProduct) {
        try requireUser(userId)
        let app = try app(bundleId)
        guard let product = app.products[productId] else {
            throw SimulatorError.notFound("app '\(bundleId)' has no product '\(productId)': define it with PUT /admin/apps/\(bundleId)/products/\(productId)")
        }
        return (app, product)
    }

    private func takeTransactionId() -> String {
        defer { nextTransactionId += 1 }
        return String(nextTransactionId)
    }

    private func takeWebOrderId() -> String {
        defer { nextWebOrderId += 1 }
        return String(nextWebOrderId)
    }

    private static func requireIdentifier(_ value: String, _ what: String) throws {
        let allowed = value.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 32 && $0 != "/" && $0 != "?" && $0 != "#" }
        guard !value.isEmpty, value.count <= 200, allowed else {
            throw SimulatorError.badRequest("\(what) '\(value)' must be 1 to 200 printable characters without spaces, '/', '?' or '#'")
        }
    }

    static let sellableTypes = ProductType.allCases.filter { $0 != .unknown }.map(\.rawValue).joined(separator: ", ")

    private static func randomSecret() -> String {
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
