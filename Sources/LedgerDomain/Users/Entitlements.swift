import Foundation

/// What a user may use at an instant: the ledger's one entitlement rule.
///
/// Every answer about entitlements comes from here: after a receipt or a restore (from the stream
/// just written), from the read routes (from the projections' rows) and from `ledger query` (from
/// the stream at any past point). Each source supplies the same three inputs (what is owned for
/// ever, the subscription periods paid for, the consumable balances) and this type decides.
public struct Entitlements: Hashable, Sendable {
    /// A non-consumable or free subscription, owned since its original purchase.
    public struct Owned: Hashable, Sendable {
        public let productId: String
        public let productType: ProductType
        public let originalTransactionId: String
        public let ownedSince: Date

        public init(productId: String, productType: ProductType, originalTransactionId: String, ownedSince: Date) {
            self.productId = productId
            self.productType = productType
            self.originalTransactionId = originalTransactionId
            self.ownedSince = ownedSince
        }
    }

    /// One subscription product, judged at `at` from all the periods bought for it.
    public struct Subscription: Hashable, Sendable {
        public let productId: String
        public let group: String
        public let kind: SubscriptionKind
        public var isActive: Bool { activeUntil != nil }
        /// When active, the end of the subscription group's unbroken run of periods covering `at`
        /// (stacked periods of any of the group's products count as one run); nil when inactive.
        public let activeUntil: Date?
        /// The end of the last period bought.
        public let expiresAt: Date
    }

    /// A consumable with units left.
    public struct Consumable: Hashable, Sendable {
        public let productId: String
        public let balance: Int
    }

    public let at: Date
    public let owned: [Owned]
    public let subscriptions: [Subscription]
    public let consumables: [Consumable]

    /// The rule. Owned for ever: non-consumables and free subscriptions. A subscription product is
    /// active when one of its periods covers `at`, until the end of its subscription group's run
    /// of periods that does (stacked periods of the group's products count as one run). A
    /// consumable is listed while its balance is above zero.
    public init(at instant: Date, owned: [Owned], periods: [SubscriptionPeriod], balances: [ConsumableBalance]) {
        at = instant
        self.owned = owned.filter { $0.productType.isOwnedForever }
        consumables = balances.filter { $0.balance > 0 }.map { Consumable(productId: $0.productId, balance: $0.balance) }
        var byProduct: [SubscriptionKey: [SubscriptionPeriod]] = [:]
        var byGroup: [SubscriptionKey: [SubscriptionPeriod]] = [:]
        for period in periods {
            byProduct[SubscriptionKey(kind: period.kind, name: period.productId), default: []].append(period)
            byGroup[SubscriptionKey(kind: period.kind, name: period.group), default: []].append(period)
        }
        // The runs of each group: periods of its products that follow each other count as one.
        let groupRuns = byGroup.mapValues { Self.runs(of: $0.sorted { $0.start < $1.start }) }
        subscriptions = byProduct.values.map { periods in
            let first = periods[0]
            let isActive = periods.contains { $0.isActive(at: instant) }
            let run = groupRuns[SubscriptionKey(kind: first.kind, name: first.group)]?
                .first { SubscriptionPeriod.covers(start: $0.start, end: $0.end, instant) }
            return Subscription(productId: first.productId, group: first.group, kind: first.kind,
                                activeUntil: isActive ? run?.end : nil, expiresAt: periods.map(\.end).max()!)
        }.sorted { ($0.kind.rawValue, $0.productId) < ($1.kind.rawValue, $1.productId) }
    }

    private struct SubscriptionKey: Hashable {
        let kind: SubscriptionKind
        let name: String
    }

    /// Periods merged where one starts by the time the previous ends.
    private static func runs(of sorted: [SubscriptionPeriod]) -> [(start: Date, end: Date)] {
        var runs: [(start: Date, end: Date)] = []
        for period in sorted {
            if let last = runs.last, period.start.milliseconds <= last.end.milliseconds {
                runs[runs.count - 1].end = max(last.end, period.end)
            } else {
                runs.append((period.start, period.end))
            }
        }
        return runs
    }
}

/// A consumable's units: bought (revoked purchases excluded), used, and what is left.
public struct ConsumableBalance: Hashable, Sendable {
    public let productId: String
    public let purchased: Int
    public let consumed: Int
    /// `purchased - consumed`; below zero only after a revocation of something already used.
    public var balance: Int { purchased - consumed }
    public var isOverdrawn: Bool { balance < 0 }

    public init(productId: String, purchased: Int, consumed: Int) {
        self.productId = productId
        self.purchased = purchased
        self.consumed = consumed
    }
}
