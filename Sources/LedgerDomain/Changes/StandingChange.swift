import Foundation

/// What changed in a user's standing, in the ledger's own words: what an app's server following
/// the ledger (the change feed, the webhooks) is told.
///
/// Found by comparing the user's judged state before and after one fact (`after(_:…)`), or, for
/// what ends or starts by time alone, the entitlements just before and at an instant
/// (`byTime(…)`). Pure: the same stream and catalog always give the same changes, so a replay of
/// the log tells the same story.
public struct StandingChange: Hashable, Sendable {
    /// One thing that happened. `type` is one of `Kind`'s raw values; the other fields say what it
    /// happened to, when they apply.
    public struct Happening: Hashable, Sendable, Codable {
        public let type: Kind
        public var productId: String?
        public var transactionId: String?
        public var originalTransactionId: String?
        public var environment: String?
        /// Purchases: `free_trial` or `intro_offer` when the payment was one.
        public var offer: String?
        /// A family member's purchase: access without money.
        public var familyShared: Bool?
        /// Refunds: `full`, `prorated` or `family_revoke`; and the reason given.
        public var refund: String?
        public var reason: String?
        /// Balances: units before and after.
        public var before: Int?
        public var after: Int?
        public var quantity: Int?
        public var deviceId: String?
        /// Subscriptions: when the access now ends (a grace period's end, a new period's end).
        public var until: Date?

        public init(_ type: Kind, productId: String? = nil) {
            self.type = type
            self.productId = productId
        }
    }

    /// Every word the feed uses, in the order a change lists what happened.
    public enum Kind: String, Hashable, Sendable, Codable, CaseIterable {
        /// A first payment for something (or the start of a free trial: see `offer`).
        case purchase
        /// An auto-renewable subscription paid for again.
        case renewal
        /// A higher subscription of the group bought, ending the current period.
        case upgrade
        /// A renewal into another product of the group (a downgrade or a crossgrade).
        case crossgrade
        /// Something already paid for came back under a new transaction id (a StoreKit restore).
        case restore
        /// Apple refunded a transaction, or support revoked it: what it gave is taken back.
        case refund
        /// The App Store said the subscription had expired before its period's end.
        case expiryReported = "expiry_reported"
        /// The App Store is retrying a renewal's billing and gives no grace period.
        case billingRetryStarted = "billing_retry_started"
        /// The App Store is retrying a renewal's billing and keeps the customer's access meanwhile.
        case gracePeriodEntered = "grace_period_entered"
        /// The App Store stopped retrying the billing (it succeeded, or gave up).
        case billingRetryEnded = "billing_retry_ended"
        /// The app used up some of a consumable.
        case consumed
        /// The ledger restored the user's non-renewing periods to a device.
        case restoredToDevice = "restored_to_device"
        /// The device finished a transaction.
        case finished
        /// A payment failed or was cancelled on the device.
        case purchaseFailed = "purchase_failed"
        /// A subscription's paid time ran out (no fact arrives for it: the clock found it).
        case expired
        /// A billing grace period ran out without a renewal.
        case gracePeriodEnded = "grace_period_ended"
        /// A subscription period bought ahead began.
        case periodStarted = "period_started"
        /// The user may now use a product they could not.
        case entitlementGained = "entitlement_gained"
        /// The user may no longer use a product they could.
        case entitlementLost = "entitlement_lost"
        /// A consumable's units changed.
        case balanceChanged = "balance_changed"
    }

    /// When it took effect: the fact's recording, or the instant something ended by time.
    public let occurredAt: Date
    /// What happened, the main thing first; never empty.
    public let happened: [Happening]
    /// What the user may use once it happened, judged at `occurredAt`.
    public let entitlements: Entitlements

    /// The change's own word: the first thing that happened.
    public var type: Kind { happened[0].type }
}

extension StandingChange {
    /// What one fact changed: `before` and `after` are the user's state judged (classified with
    /// `catalog`) before and after `event`, which was recorded at `instant`. Nil when it changed
    /// nothing a follower sees (a device registered, a receipt telling what was known).
    public static func after(
        _ event: UserEvent, before: UserLedger, after: UserLedger, catalog: ProductCatalog, at instant: Date
    ) -> StandingChange? {
        var happened: [Happening] = []
        // New transactions, in the order the stream recorded them.
        for transaction in after.transactionsInOrder where before.transactions[transaction.transactionId] == nil {
            var happening = Happening(Self.kind(of: transaction.kind), productId: transaction.productId)
            happening.transactionId = transaction.transactionId
            happening.originalTransactionId = transaction.originalTransactionId
            happening.environment = transaction.environment.rawValue
            happening.offer = transaction.offer == .none ? nil : transaction.offer.rawValue
            happening.familyShared = transaction.isFamilyShared ? true : nil
            happening.quantity = transaction.productType == .consumable ? transaction.quantity : nil
            happening.until = transaction.periodEnd
            happened.append(happening)
        }
        for transaction in after.transactionsInOrder {
            let earlier = before.transactions[transaction.transactionId]
            if transaction.isRevoked, earlier?.isRevoked != true {
                var happening = Happening(.refund, productId: transaction.productId)
                happening.transactionId = transaction.transactionId
                happening.originalTransactionId = transaction.originalTransactionId
                happening.environment = transaction.environment.rawValue
                happening.refund = transaction.refund?.kind.rawValue ?? StandingRefund.full
                happening.reason = transaction.revocationReason
                happened.append(happening)
            }
            if transaction.expiryReportedAt != nil, let earlier, earlier.expiryReportedAt == nil {
                var happening = Happening(.expiryReported, productId: transaction.productId)
                happening.transactionId = transaction.transactionId
                happening.originalTransactionId = transaction.originalTransactionId
                happened.append(happening)
            }
        }
        happened += billing(before: before, after: after, at: instant)
        switch event {
        case .itemConsumed(let consumed):
            var happening = Happening(.consumed, productId: consumed.productId)
            happening.quantity = consumed.quantity
            happening.deviceId = consumed.deviceId
            happened.append(happening)
        case .subscriptionRestoredToDevice(let restored):
            var happening = Happening(.restoredToDevice)
            happening.deviceId = restored.deviceId
            happening.quantity = restored.transactionIds.count
            happened.append(happening)
        case .transactionFinished(let finished) where !before.isFinished(finished.transactionId):
            var happening = Happening(.finished, productId: after.transactions[finished.transactionId]?.productId)
            happening.transactionId = finished.transactionId
            happening.deviceId = finished.deviceId
            happened.append(happening)
        case .purchaseFailed(let failed):
            var happening = Happening(.purchaseFailed, productId: failed.productId)
            happening.deviceId = failed.deviceId
            happening.reason = failed.cancelled ? "cancelled" : failed.errorCode
            happened.append(happening)
        default:
            break
        }
        let was = before.entitlements(catalog: catalog, at: instant)
        let now = after.entitlements(catalog: catalog, at: instant)
        happened += differences(from: was, to: now)
        happened += balances(before: before, after: after)
        guard !happened.isEmpty else { return nil }
        return StandingChange(occurredAt: instant, happened: happened, entitlements: now)
    }

    /// What time alone changed at `instant` for a user whose state is `state`: what ran out or
    /// began then. Nil when nothing a follower sees changed.
    public static func byTime(_ state: UserLedger, catalog: ProductCatalog, at instant: Date) -> StandingChange? {
        let was = state.entitlements(catalog: catalog, at: Date(milliseconds: instant.milliseconds - 1))
        let now = state.entitlements(catalog: catalog, at: instant)
        let differences = differences(from: was, to: now)
        guard !differences.isEmpty else { return nil }
        var happened: [Happening] = []
        let graceEnds = Set(state.facts.renewalInfo.values.compactMap { info in
            info.isInBillingRetry ? info.gracePeriodExpiresDate?.milliseconds : nil
        })
        for difference in differences {
            switch difference.type {
            case .entitlementLost:
                var happening = Happening(graceEnds.contains(instant.milliseconds) ? .gracePeriodEnded : .expired, productId: difference.productId)
                happening.until = instant
                happened.append(happening)
            case .entitlementGained:
                var happening = Happening(.periodStarted, productId: difference.productId)
                happening.until = difference.until
                happened.append(happening)
            default:
                break
            }
        }
        return StandingChange(occurredAt: instant, happened: happened + differences, entitlements: now)
    }

    /// The first instant after `instant` at which time alone may change what the user may use:
    /// the nearest start or end of a paid period (a grace period's end included). Nil when none
    /// lies ahead.
    public static func nextDeadline(_ state: UserLedger, catalog: ProductCatalog, after instant: Date) -> Date? {
        let after = instant.milliseconds
        var nearest: Int64?
        for period in state.subscriptionPeriods(catalog: catalog) {
            for edge in [period.start.milliseconds, period.end.milliseconds] where edge > after {
                nearest = min(nearest ?? edge, edge)
            }
        }
        return nearest.map(Date.init(milliseconds:))
    }

    /// Entitlements gained and lost between two judgements.
    static func differences(from was: Entitlements, to now: Entitlements) -> [Happening] {
        var happened: [Happening] = []
        let before = activeProducts(was)
        let after = activeProducts(now)
        for (product, until) in after.sorted(by: { $0.key < $1.key }) where before[product] == nil {
            var happening = Happening(.entitlementGained, productId: product)
            happening.until = until
            happened.append(happening)
        }
        for product in before.keys.sorted() where after[product] == nil {
            happened.append(Happening(.entitlementLost, productId: product))
        }
        return happened
    }

    /// Consumable balances changed, below zero included (a refund of units already used).
    private static func balances(before: UserLedger, after: UserLedger) -> [Happening] {
        let was = Dictionary(before.consumableBalances.map { ($0.productId, $0.balance) }, uniquingKeysWith: { first, _ in first })
        let now = Dictionary(after.consumableBalances.map { ($0.productId, $0.balance) }, uniquingKeysWith: { first, _ in first })
        var happened: [Happening] = []
        for product in Set(was.keys).union(now.keys).sorted() where was[product] ?? 0 != now[product] ?? 0 {
            var happening = Happening(.balanceChanged, productId: product)
            happening.before = was[product] ?? 0
            happening.after = now[product] ?? 0
            happened.append(happening)
        }
        return happened
    }

    /// The products the user may use, each with when that ends (nil: for ever).
    private static func activeProducts(_ entitlements: Entitlements) -> [String: Date?] {
        var products: [String: Date?] = [:]
        for owned in entitlements.owned { products[owned.productId] = .some(nil) }
        for subscription in entitlements.subscriptions where subscription.isActive {
            products[subscription.productId] = .some(subscription.activeUntil)
        }
        return products
    }

    /// Billing retries begun, grace periods entered and retries ended, per subscription.
    private static func billing(before: UserLedger, after: UserLedger, at instant: Date) -> [Happening] {
        var happened: [Happening] = []
        for original in after.facts.renewalInfo.keys.sorted() {
            guard let now = after.facts.renewalInfo[original] else { continue }
            let was = before.facts.renewalInfo[original]
            let productId = now.productId ?? after.transactions[original]?.productId
            let wasRetrying = was?.isInBillingRetry ?? false
            let grace = now.gracePeriodExpiresDate.flatMap { $0.milliseconds > instant.milliseconds ? $0 : nil }
            if now.isInBillingRetry {
                let wasGrace = wasRetrying ? was?.gracePeriodExpiresDate : nil
                if let grace, wasGrace?.milliseconds != grace.milliseconds {
                    var happening = Happening(.gracePeriodEntered, productId: productId)
                    happening.originalTransactionId = original
                    happening.until = grace
                    happened.append(happening)
                } else if !wasRetrying {
                    var happening = Happening(.billingRetryStarted, productId: productId)
                    happening.originalTransactionId = original
                    happened.append(happening)
                }
            } else if wasRetrying {
                var happening = Happening(.billingRetryEnded, productId: productId)
                happening.originalTransactionId = original
                happened.append(happening)
            }
        }
        return happened
    }

    private static func kind(of kind: UserLedger.Transaction.Kind) -> Kind {
        switch kind {
        case .purchase: .purchase
        case .renewal: .renewal
        case .upgrade: .upgrade
        case .crossgrade: .crossgrade
        case .restore: .restore
        }
    }
}

/// A revocation that no signed view described takes everything back.
private enum StandingRefund {
    static let full = UserLedger.Transaction.Refund.Kind.full.rawValue
}
