import AppStore
import Crypto
import Foundation
import LedgerDomain

/// The simulator's App Store: apps, products, test users, families, transactions and its clock, in memory.
///
/// Renewals are not scheduled: they are derived from the clock whenever someone looks (a verify, an
/// admin read), so advancing the clock by an hour and verifying shows every renewal of that hour.
/// A renewal exists once the clock has passed the end of the period before it, for up to 6 renewals
/// in the sandbox, unless support cancelled the subscription first, auto-renew is off or billing
/// fails. Every change of state (a purchase, a refund, billing, auto-renew) first makes the renewals
/// due by then, so that each renewal is decided by the state at its own time.
actor SimulatorStore {
    /// Renewals in the sandbox stop after this many, as Apple's does.
    static let sandboxRenewalLimit = 6

    struct App: Sendable {
        var bundleId: String
        var sharedSecret: String
        var products: [String: SimulatedProduct]
        /// Where App Store Server Notifications V2 for the app go (App Store Connect's setting).
        var notificationURL: String? = nil
        /// App Store Server API keys by key id: the issuer and the public key (x963) that checks tokens.
        var apiKeys: [String: (issuerID: String, publicKey: Data)] = [:]
    }

    /// Something Apple would tell the app's server about (App Store Server Notifications V2),
    /// waiting for `takeNotices`.
    struct Notice: Sendable {
        let type: String
        let subtype: String?
        let transaction: SimulatorTransaction
        /// Auto-renewables: the subscription as it stands when the notice is made.
        let renewal: SubscriptionView?
        let at: Date
        let notificationURL: String
        /// The product's price, per unit, in milliunits, and its currency.
        let price: (milliunits: Int64, currency: String)?
    }

    private struct UserApp: Hashable {
        let userId: String
        let bundleId: String
    }

    /// A subscription as a verify answer needs it.
    struct SubscriptionView: Sendable {
        let originalTransactionId: String
        /// The product of the latest period.
        let productId: String
        /// The product the next renewal is of.
        let autoRenewProductId: String
        let latest: SimulatorTransaction
        let willRenew: Bool
        let isActive: Bool
        /// Lapsed because a renewal failed, and the App Store still tries to bill it.
        let isInBillingRetry: Bool
        /// While in billing retry with a grace period: when the grace period ends.
        let gracePeriodExpiresDate: Date?

        /// Why a subscription that is not active ended: 2 a billing error, else 1 (the customer, or
        /// the sandbox, stopped it).
        var expirationIntent: Int? {
            isActive ? nil : (isInBillingRetry ? 2 : 1)
        }
    }

    /// Everything a `verifyReceipt` answer for one receipt is rendered from, read at one instant.
    struct VerificationView: Sendable {
        let now: Date
        let sharedSecret: String
        /// The receipt's own transactions, in their current state (refunds show).
        let covered: [SimulatorTransaction]
        /// Every transaction of the user in the app, renewals included, by purchase date; finished
        /// consumables left out.
        let all: [SimulatorTransaction]
        let subscriptions: [SubscriptionView]
        /// The first purchase in the app (the app receipt's `original_purchase_date`).
        let firstPurchase: Date?
    }

    /// What a purchase did: the new transaction (or, for a change that waits for the next renewal,
    /// the current period's) and the change of plan it made, if any.
    struct Purchase: Sendable {
        let transaction: SimulatorTransaction
        let change: SimulatorPlanChange?
        /// `false` when the purchase only scheduled a change and created no transaction.
        let createdTransaction: Bool
    }

    let environment: StoreEnvironment
    private var clockOffset: TimeInterval = 0
    private var apps: [String: App] = [:]
    private var users: Set<String> = []
    private var transactions: [String: SimulatorTransaction] = [:]
    private var transactionsByUser: [UserApp: [String]] = [:]
    private var subscriptions: [String: SimulatorSubscription] = [:]
    private var sharedSubscriptions: [String: SharedSubscription] = [:]
    /// Original transaction ids of the user's subscriptions in the app, own and shared.
    private var subscriptionsByUser: [UserApp: [String]] = [:]
    private var families = SimulatorFamilies()
    private var nextTransactionId: Int64
    private var nextWebOrderId: Int64
    private var nextUserNumber = 1
    private var faults = SimulatorFaults()
    private var notices: [Notice] = []

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
        // Renewals happen on the clock, not when someone looks: their notifications go out now.
        for key in subscriptionsByUser.keys { materialize(key) }
        return now
    }

    // MARK: App Store Server API

    /// Makes an App Store Server API key for the app, as App Store Connect does: the private key is
    /// handed out once (PEM) and the simulator keeps only the public key, to check tokens.
    func createAPIKey(bundleId: String) throws -> (keyID: String, issuerID: String, privateKeyPEM: String) {
        var app = try app(bundleId)
        let key = P256.Signing.PrivateKey()
        let keyID = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10)).uppercased()
        let issuerID = UUID().uuidString.lowercased()
        app.apiKeys[keyID] = (issuerID, key.publicKey.x963Representation)
        apps[bundleId] = app
        return (keyID, issuerID, key.pemRepresentation)
    }

    /// The issuer and public key of one of the app's API keys.
    func apiKey(bundleId: String, keyID: String) -> (issuerID: String, publicKey: Data)? {
        apps[bundleId]?.apiKeys[keyID]
    }

    /// Get Transaction History: every transaction of the user who made `transactionId` in the app,
    /// as StoreKit 2 knows them (no StoreKit 1 restores), oldest first; nil for an unknown transaction.
    func history(of transactionId: String, bundleId: String) -> [SimulatorTransaction]? {
        guard let transaction = transactions[transactionId], transaction.bundleId == bundleId else { return nil }
        let key = UserApp(userId: transaction.userId, bundleId: bundleId)
        materialize(key)
        return (transactionsByUser[key] ?? []).compactMap { transactions[$0] }
            .filter { $0.restoredTransactionId == nil }
            .sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
    }

    // MARK: Notifications

    /// A product's price per unit in milliunits, and its currency, when the product has one.
    func price(bundleId: String, productId: String) -> (milliunits: Int64, currency: String)? {
        apps[bundleId]?.products[productId].flatMap { product in
            product.price.flatMap(SimulatedProduct.milliunits).map { ($0, product.currency ?? "USD") }
        }
    }

    /// What happened since the last call that Apple would notify the app's server of, oldest first.
    func takeNotices() -> [Notice] {
        defer { notices.removeAll() }
        return notices
    }

    /// Noted only for an app with a notification URL: Apple sends nothing without one.
    private func notify(_ type: String, _ subtype: String? = nil, about transaction: SimulatorTransaction) {
        guard let app = apps[transaction.bundleId], let url = app.notificationURL else { return }
        let renewal = transaction.productType == .autoRenewable
            ? (subscriptions[transaction.originalTransactionId]).flatMap { view(of: $0, at: now) }
            : nil
        let price = price(bundleId: transaction.bundleId, productId: transaction.productId)
        notices.append(Notice(type: type, subtype: subtype, transaction: transaction, renewal: renewal, at: now,
                              notificationURL: url, price: price))
    }

    /// The notification Apple sends for a new transaction: none for restores and family members' copies.
    private func notifyNew(_ transaction: SimulatorTransaction) {
        guard transaction.isPayment else { return }
        guard transaction.productType == .autoRenewable else {
            notify("ONE_TIME_CHARGE", about: transaction)
            return
        }
        if transaction.transactionId == transaction.originalTransactionId {
            notify("SUBSCRIBED", "INITIAL_BUY", about: transaction)
            return
        }
        let periods = subscriptions[transaction.originalTransactionId]?.periodIds ?? []
        let previous = periods.last { $0 != transaction.transactionId }.flatMap { transactions[$0] }
        if let previous, previous.productId != transaction.productId {
            notify("DID_CHANGE_RENEWAL_PREF", previous.isUpgraded ? "UPGRADE" : "DOWNGRADE", about: transaction)
        } else {
            notify("DID_RENEW", about: transaction)
        }
    }

    // MARK: Apps, products, users

    @discardableResult
    func putApp(bundleId: String, sharedSecret: String?, notificationURL: String? = nil) throws -> App {
        try Self.requireIdentifier(bundleId, "bundle id")
        var app = apps[bundleId] ?? App(bundleId: bundleId, sharedSecret: Self.randomSecret(), products: [:])
        if let sharedSecret {
            guard !sharedSecret.isEmpty else { throw SimulatorError.badRequest("sharedSecret must not be empty") }
            app.sharedSecret = sharedSecret
        }
        if let notificationURL {
            guard notificationURL.isEmpty || URL(string: notificationURL)?.host != nil else {
                throw SimulatorError.badRequest("notificationURL '\(notificationURL)' is not an http(s) URL (\"\" turns notifications off)")
            }
            app.notificationURL = notificationURL.isEmpty ? nil : notificationURL
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
        try Self.checkSubscriptionOptions(product)
        if let price = product.price, SimulatedProduct.milliunits(price) == nil {
            throw SimulatorError.badRequest("price '\(price)' is not a decimal amount with at most three places, such as \"0.99\"")
        }
        if let currency = product.currency, !(currency.count == 3 && currency.allSatisfy { $0.isASCII && $0.isUppercase }) {
            throw SimulatorError.badRequest("currency '\(currency)' is not an ISO 4217 code such as USD")
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

    /// Makes `member` part of `organizer`'s family: from now on the member's receipts list the
    /// organizer's purchases of family-shareable products, past ones included. `false` when it was so already.
    func linkFamily(organizer: String, member: String) throws -> Bool {
        try requireUser(organizer)
        try requireUser(member)
        return try families.link(organizer: organizer, member: member)
    }

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
    func cancel(transactionId: String, reason: Int) throws -> SimulatorTransaction {
        guard var transaction = transactions[transactionId] else {
            throw SimulatorError.notFound("no transaction '\(transactionId)'")
        }
        guard reason == 0 || reason == 1 else {
            throw SimulatorError.badRequest("reason is 0 (other) or 1 (a problem in the app)")
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

    // MARK: Subscriptions

    /// The state of the subscription with this original transaction id, own or shared.
    func subscriptionStatus(originalTransactionId: String) throws -> SimulatorSubscriptionStatus {
        let key = try requireSubscription(originalTransactionId, toChange: false)
        materialize(key)
        return try status(originalTransactionId)
    }

    /// Makes the subscription's renewals fail from now on (`failing`), or work again.
    ///
    /// While failing, a period that ends is not renewed: the subscription is in billing retry, and
    /// with `gracePeriodDays` in a grace period that long from the end of the period (real days, in
    /// both environments). When billing works again and the subscription had lapsed, the next period
    /// starts now, as a renewal.
    func setBilling(originalTransactionId: String, failing: Bool, gracePeriodDays: Int?) throws -> SimulatorSubscriptionStatus {
        if let gracePeriodDays {
            guard failing else { throw SimulatorError.badRequest("gracePeriodDays goes with \"failing\": true") }
            guard (1...60).contains(gracePeriodDays) else {
                throw SimulatorError.badRequest("gracePeriodDays is from 1 to 60 (App Store Connect offers 3, 16 and 28)")
            }
        }
        let key = try requireSubscription(originalTransactionId, toChange: true)
        materialize(key)
        guard var subscription = subscriptions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        let now = self.now
        var made: [SimulatorTransaction] = []
        if failing {
            subscription.billingIssue = .init(gracePeriodDays: gracePeriodDays)
        } else if subscription.billingIssue != nil {
            let lapsed = subscription.latestEnd(in: environment) <= now
            subscription.billingIssue = nil
            if lapsed, subscription.renews(in: environment) {
                made.append(renew(&subscription, startingAt: now, restart: true))
            }
        }
        subscriptions[originalTransactionId] = subscription
        if failing, let latest = subscription.latestId.flatMap({ transactions[$0] }) {
            notify("DID_FAIL_TO_RENEW", gracePeriodDays == nil ? nil : "GRACE_PERIOD", about: latest)
        }
        var answer = try status(originalTransactionId)
        answer.newTransactions = made
        return answer
    }

    /// Turns auto-renew off (the customer cancels: the subscription ends with its current period)
    /// or on again while the period still runs.
    func setAutoRenew(originalTransactionId: String, enabled: Bool) throws -> SimulatorSubscriptionStatus {
        let key = try requireSubscription(originalTransactionId, toChange: true)
        materialize(key)
        guard var subscription = subscriptions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        if enabled, !subscription.autoRenewEnabled, subscription.latestEnd(in: environment) <= now {
            throw SimulatorError.conflict(
                "subscription \(originalTransactionId) lapsed at \(Self.iso(subscription.latestEnd(in: environment))): buy \(subscription.plan.productId) again"
            )
        }
        let changed = subscription.autoRenewEnabled != enabled
        subscription.autoRenewEnabled = enabled
        subscriptions[originalTransactionId] = subscription
        if changed, let latest = subscription.latestId.flatMap({ transactions[$0] }) {
            notify("DID_CHANGE_RENEWAL_STATUS", enabled ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED", about: latest)
        }
        return try status(originalTransactionId)
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
            all: all.filter { !$0.leavesReceipts }.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) },
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
        guard faults.failNext >= 0, (0...60_000).contains(faults.latencyMilliseconds), (0...60_000).contains(faults.trickleMilliseconds) else {
            throw SimulatorError.badRequest("failNext must be 0 or more, latencyMilliseconds and trickleMilliseconds from 0 to 60000")
        }
        guard faults.failNext == 0 || faults.failStatus != 0 else {
            throw SimulatorError.badRequest("failStatus must be a non-zero status such as 21005")
        }
        self.faults = faults
        return faults
    }

    var currentFaults: SimulatorFaults { faults }

    /// The fault for one verify call: the status to answer instead (counting it down), the latency
    /// and how slowly the body goes out.
    func takeFault() -> (status: Int?, isRetryable: Bool, latencyMilliseconds: Int, trickleMilliseconds: Int) {
        if faults.failNext > 0 {
            faults.failNext -= 1
            return (faults.failStatus, faults.isRetryable, faults.latencyMilliseconds, faults.trickleMilliseconds)
        }
        return (nil, false, faults.latencyMilliseconds, faults.trickleMilliseconds)
    }

    // MARK: Internals: subscriptions

    /// A purchase of an auto-renewable: a change of the group's live subscription if there is one,
    /// else a new subscription, with the product's introductory offer if it is the user's first in the group.
    private func subscribe(_ key: UserApp, to product: SimulatedProduct, in app: App, at now: Date) throws -> Purchase {
        let group = product.subscriptionGroup ?? product.productId
        let plan = SimulatorSubscription.Plan(productId: product.productId, duration: product.duration ?? .oneMonth)
        let own = (subscriptionsByUser[key] ?? []).compactMap { subscriptions[$0] }.filter { $0.group == group }
        if let live = own.first(where: { isLive($0) }) {
            return try changePlan(live, to: plan, level: product.serviceLevel, in: app, at: now)
        }
        let offer = own.isEmpty ? product.introOffer : nil
        let id = takeTransactionId()
        var subscription = SimulatorSubscription(original: id, userId: key.userId, bundleId: key.bundleId, group: group, plan: plan, at: now)
        subscription.periodsSinceAnchor = offer?.firstTransactionPeriods ?? 1
        subscription.introPeriodsLeft = offer?.kind == .payAsYouGo ? (offer?.periods ?? 1) - 1 : 0
        let transaction = record(SimulatorTransaction(
            transactionId: id, originalTransactionId: id, userId: key.userId, bundleId: key.bundleId,
            productId: plan.productId, productType: .autoRenewable, quantity: 1,
            purchaseDate: now, originalPurchaseDate: now, expiresDate: subscription.latestEnd(in: environment),
            webOrderLineItemId: takeWebOrderId(), subscriptionGroupIdentifier: subscription.groupIdentifier,
            isTrialPeriod: offer?.kind == .freeTrial, isInIntroOfferPeriod: offer.map { $0.kind != .freeTrial } ?? false
        ))
        subscription.periodIds = [id]
        subscriptions[id] = subscription
        subscriptionsByUser[key, default: []].append(id)
        return Purchase(transaction: transaction, change: nil, createdTransaction: true)
    }

    /// Another product of the group bought while `live` runs, as the App Store ranks it: to a higher
    /// level (smaller number), or to the same level and duration, at once: the current period ends now
    /// (`is_upgraded`, `cancellation_date`) and a period of the new product starts, with a new web
    /// order. Else at the next renewal, which will be of the new product (`auto_renew_product_id`).
    private func changePlan(
        _ live: SimulatorSubscription,
        to plan: SimulatorSubscription.Plan,
        level: Int,
        in app: App,
        at now: Date
    ) throws -> Purchase {
        var subscription = live
        guard let latestId = subscription.latestId, var latest = transactions[latestId] else {
            throw SimulatorError.notFound("subscription \(live.originalTransactionId) has no period")
        }
        guard Self.isActive(latest, at: now) else {
            let route = "POST /admin/subscriptions/\(live.originalTransactionId)"
            throw SimulatorError.conflict(
                "subscription \(live.originalTransactionId) is in billing retry: make billing work (\(route)/billing {\"failing\": false}) or turn auto-renew off (\(route)/auto-renew {\"enabled\": false}) first"
            )
        }
        guard plan.productId != subscription.plan.productId else {
            throw SimulatorError.conflict(
                "\(live.userId) is subscribed to \(plan.productId) until \(latest.expiresDate.map(Self.iso) ?? "?"): advance the clock past it or cancel transaction \(latestId)"
            )
        }
        let currentLevel = app.products[subscription.plan.productId]?.serviceLevel ?? 1
        let kind: SimulatorPlanChange.Kind = level < currentLevel ? .upgrade : (level > currentLevel ? .downgrade : .crossgrade)
        let immediate = kind == .upgrade || (kind == .crossgrade && plan.duration == subscription.plan.duration)
        let change = SimulatorPlanChange(
            kind: kind, fromProductId: subscription.plan.productId, toProductId: plan.productId,
            effectiveDate: immediate ? now : (latest.expiresDate ?? now), isImmediate: immediate
        )
        guard immediate else {
            subscription.pendingPlan = plan
            subscriptions[subscription.originalTransactionId] = subscription
            return Purchase(transaction: latest, change: change, createdTransaction: false)
        }
        latest.isUpgraded = true
        latest.cancellationDate = now
        transactions[latestId] = latest
        subscription.switchPlan(to: plan, at: now)
        let transaction = record(periodTransaction(of: subscription, startingAt: now, introPrice: false))
        subscription.periodIds.append(transaction.transactionId)
        subscriptions[subscription.originalTransactionId] = subscription
        return Purchase(transaction: transaction, change: change, createdTransaction: true)
    }

    /// Makes the next period of `subscription`, starting at `start`, and records it.
    @discardableResult
    private func renew(_ subscription: inout SimulatorSubscription, startingAt start: Date, restart: Bool) -> SimulatorTransaction {
        let next = subscription.advance(startingAt: start, restart: restart)
        let renewal = record(periodTransaction(of: subscription, startingAt: start, introPrice: next.introPrice))
        subscription.periodIds.append(renewal.transactionId)
        return renewal
    }

    /// The transaction of the subscription's latest period (already advanced to it), starting at `start`.
    private func periodTransaction(of subscription: SimulatorSubscription, startingAt start: Date, introPrice: Bool) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: subscription.originalTransactionId,
            userId: subscription.userId, bundleId: subscription.bundleId, productId: subscription.plan.productId,
            productType: .autoRenewable, quantity: 1, purchaseDate: start, originalPurchaseDate: subscription.originalPurchaseDate,
            expiresDate: subscription.latestEnd(in: environment), webOrderLineItemId: takeWebOrderId(),
            subscriptionGroupIdentifier: subscription.groupIdentifier, isInIntroOfferPeriod: introPrice
        )
    }

    /// Active (its period runs and was not refunded) or in billing retry: the group's subscription of now.
    private func isLive(_ subscription: SimulatorSubscription) -> Bool {
        guard let view = view(of: subscription, at: now) else { return false }
        return view.isActive || view.isInBillingRetry
    }

    /// A period that runs now and was not refunded nor cut short.
    private static func isActive(_ latest: SimulatorTransaction, at now: Date) -> Bool {
        latest.cancellationDate == nil && (latest.expiresDate ?? .distantPast) > now
    }

    /// Makes every renewal due by now of the user's subscriptions in the app, and the family's copies.
    private func materialize(_ key: UserApp) {
        let now = self.now
        for originalId in subscriptionsByUser[key] ?? [] {
            guard var subscription = subscriptions[originalId] else { continue }
            var changed = false
            while subscription.renews(in: environment), subscription.latestEnd(in: environment) <= now {
                renew(&subscription, startingAt: subscription.latestEnd(in: environment), restart: false)
                changed = true
            }
            if changed { subscriptions[originalId] = subscription }
        }
        if let organizer = families.organizer(of: key.userId) {
            shareFamilyPurchases(with: key, from: UserApp(userId: organizer, bundleId: key.bundleId))
        }
    }

    private func subscriptionViews(_ key: UserApp) -> [SubscriptionView] {
        let now = self.now
        return (subscriptionsByUser[key] ?? []).compactMap { originalId in
            if let subscription = subscriptions[originalId] { return view(of: subscription, at: now) }
            return sharedSubscriptions[originalId].flatMap { view(of: $0, at: now) }
        }
    }

    private func view(of subscription: SimulatorSubscription, at now: Date) -> SubscriptionView? {
        guard let latestId = subscription.latestId, let latest = transactions[latestId] else { return nil }
        let willRenew = subscription.willRenew(in: environment)
        let end = latest.expiresDate ?? .distantPast
        let isActive = Self.isActive(latest, at: now)
        let retrying = !isActive && latest.cancellationDate == nil && willRenew && subscription.billingIssue != nil
        return SubscriptionView(
            originalTransactionId: subscription.originalTransactionId,
            productId: latest.productId,
            autoRenewProductId: (subscription.pendingPlan ?? subscription.plan).productId,
            latest: latest,
            willRenew: willRenew,
            isActive: isActive,
            isInBillingRetry: retrying,
            gracePeriodExpiresDate: retrying ? subscription.billingIssue?.gracePeriodDays.map { end.addingTimeInterval(Double($0) * 86_400) } : nil
        )
    }

    /// A member's copy renews as the buyer's does while it mirrors the buyer's latest period; once the
    /// buyer's subscription moved to a product not shared, the copy ends with its last period.
    private func view(of shared: SharedSubscription, at now: Date) -> SubscriptionView? {
        guard let latestId = shared.periodIds.last, let latest = transactions[latestId] else { return nil }
        let isActive = Self.isActive(latest, at: now)
        if let buyer = subscriptions[shared.buyerOriginalTransactionId], buyer.latestId == latest.sharedTransactionId,
           let buyerView = view(of: buyer, at: now) {
            return SubscriptionView(
                originalTransactionId: shared.originalTransactionId, productId: latest.productId,
                autoRenewProductId: buyerView.autoRenewProductId, latest: latest, willRenew: buyerView.willRenew,
                isActive: isActive, isInBillingRetry: buyerView.isInBillingRetry, gracePeriodExpiresDate: buyerView.gracePeriodExpiresDate
            )
        }
        return SubscriptionView(
            originalTransactionId: shared.originalTransactionId, productId: latest.productId, autoRenewProductId: latest.productId,
            latest: latest, willRenew: false, isActive: isActive, isInBillingRetry: false, gracePeriodExpiresDate: nil
        )
    }

    private func status(_ originalTransactionId: String) throws -> SimulatorSubscriptionStatus {
        let now = self.now
        let own = subscriptions[originalTransactionId]
        let shared = sharedSubscriptions[originalTransactionId]
        guard let view = own.flatMap({ view(of: $0, at: now) }) ?? shared.flatMap({ view(of: $0, at: now) }) else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        let billing = own?.billingIssue ?? shared.flatMap { subscriptions[$0.buyerOriginalTransactionId]?.billingIssue }
        return SimulatorSubscriptionStatus(
            originalTransactionId: originalTransactionId, userId: view.latest.userId, bundleId: view.latest.bundleId,
            productId: view.productId, autoRenewProductId: view.autoRenewProductId, autoRenewStatus: view.willRenew,
            isActive: view.isActive, expiresDate: view.latest.expiresDate, billingFailing: billing != nil,
            gracePeriodDays: billing?.gracePeriodDays, isInBillingRetryPeriod: view.isInBillingRetry,
            gracePeriodExpiresDate: view.gracePeriodExpiresDate, latestTransaction: view.latest
        )
    }

    /// The user and app of a subscription; one a family member only shares cannot be changed through it.
    private func requireSubscription(_ originalTransactionId: String, toChange: Bool) throws -> UserApp {
        if let subscription = subscriptions[originalTransactionId] {
            return UserApp(userId: subscription.userId, bundleId: subscription.bundleId)
        }
        guard let shared = sharedSubscriptions[originalTransactionId], let first = transactions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription with original transaction id '\(originalTransactionId)'")
        }
        guard !toChange else {
            throw SimulatorError.badRequest(
                "subscription \(originalTransactionId) is shared by a family member: change the buyer's subscription \(shared.buyerOriginalTransactionId)"
            )
        }
        return UserApp(userId: first.userId, bundleId: first.bundleId)
    }

    // MARK: Internals: family sharing

    /// Gives the member a copy of each of the organizer's purchases of a family-shareable product in
    /// the app: their own transaction ids, the organizer's dates, `FAMILY_SHARED`. Copies made earlier
    /// follow the organizer's transaction (a refund or an upgrade shows on both); a purchase refunded
    /// before it was shared is not shared.
    private func shareFamilyPurchases(with member: UserApp, from buyer: UserApp) {
        guard let app = apps[member.bundleId] else { return }
        materialize(buyer)
        for sourceId in transactionsByUser[buyer] ?? [] {
            guard let source = transactions[sourceId], source.isPayment,
                  app.products[source.productId]?.familyShareable == true
            else { continue }
            if let copyId = families.copy(of: sourceId, for: member.userId), var copy = transactions[copyId] {
                copy.cancellationDate = source.cancellationDate
                copy.cancellationReason = source.cancellationReason
                copy.isUpgraded = source.isUpgraded
                transactions[copyId] = copy
                continue
            }
            guard !source.isRefunded else { continue }
            let copy = record(familyCopy(of: source, for: member))
            families.recordCopy(copy.transactionId, of: sourceId, for: member.userId)
        }
    }

    private func familyCopy(of source: SimulatorTransaction, for member: UserApp) -> SimulatorTransaction {
        let id = takeTransactionId()
        var original = id
        if source.productType == .autoRenewable {
            if let existing = families.sharedSubscription(of: source.originalTransactionId, for: member.userId) {
                original = existing
                sharedSubscriptions[existing]?.periodIds.append(id)
            } else {
                families.recordSharedSubscription(id, of: source.originalTransactionId, for: member.userId)
                sharedSubscriptions[id] = SharedSubscription(
                    originalTransactionId: id, buyerOriginalTransactionId: source.originalTransactionId, periodIds: [id]
                )
                subscriptionsByUser[member, default: []].append(id)
            }
        }
        return SimulatorTransaction(
            transactionId: id, originalTransactionId: original, userId: member.userId, bundleId: member.bundleId,
            productId: source.productId, productType: source.productType, quantity: source.quantity,
            purchaseDate: source.purchaseDate, originalPurchaseDate: source.originalPurchaseDate, expiresDate: source.expiresDate,
            webOrderLineItemId: source.productType == .autoRenewable ? takeWebOrderId() : nil,
            cancellationDate: source.cancellationDate, cancellationReason: source.cancellationReason,
            ownership: .familyShared, subscriptionGroupIdentifier: source.subscriptionGroupIdentifier,
            isTrialPeriod: source.isTrialPeriod, isInIntroOfferPeriod: source.isInIntroOfferPeriod, isUpgraded: source.isUpgraded,
            sharedTransactionId: source.transactionId
        )
    }

    // MARK: Internals: restores

    /// The user's own first purchase of `productId` (not a family member's), not refunded.
    private func originalPurchase(_ key: UserApp, productId: String) -> SimulatorTransaction? {
        (transactionsByUser[key] ?? []).lazy.compactMap { self.transactions[$0] }.first {
            $0.productId == productId && $0.transactionId == $0.originalTransactionId && $0.cancellationDate == nil
                && $0.ownership == .purchased
        }
    }

    /// A non-consumable's restore: a new transaction now, pointing at the purchase.
    private func restoreTransaction(of original: SimulatorTransaction, at now: Date) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: original.transactionId, userId: original.userId,
            bundleId: original.bundleId, productId: original.productId, productType: original.productType, quantity: 1,
            purchaseDate: now, originalPurchaseDate: original.purchaseDate, expiresDate: nil, webOrderLineItemId: nil,
            ownership: original.ownership, restoredTransactionId: original.transactionId
        )
    }

    /// An auto-renewable period's restore: a new transaction id, everything else the period's own,
    /// its `web_order_line_item_id` included (which is how a restore is told from a renewal).
    private func restoredPeriod(_ period: SimulatorTransaction) -> SimulatorTransaction {
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
    private func record(_ transaction: SimulatorTransaction) -> SimulatorTransaction {
        transactions[transaction.transactionId] = transaction
        transactionsByUser[UserApp(userId: transaction.userId, bundleId: transaction.bundleId), default: []].append(transaction.transactionId)
        notifyNew(transaction)
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

    /// Groups, levels and intro offers are for auto-renewables; Family Sharing for non-consumables and auto-renewables.
    private static func checkSubscriptionOptions(_ product: SimulatedProduct) throws {
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
