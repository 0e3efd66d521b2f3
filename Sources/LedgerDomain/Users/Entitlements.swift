import Foundation

/// What a user may use at an instant, computed from the stream's state at read time.
public struct Entitlements: Hashable, Sendable {
    /// A non-consumable or free subscription, owned since its original purchase.
    public struct Owned: Hashable, Sendable {
        public let productId: String
        public let originalTransactionId: String
        public let purchaseDate: Date
    }

    /// An auto-renewable subscription: one original transaction and its renewals.
    public struct AutoRenewable: Hashable, Sendable {
        public let productId: String
        public let originalTransactionId: String
        /// The latest expiry among the original's non-revoked transactions.
        public let expiresDate: Date?
        public let isActive: Bool
    }

    public let at: Date
    public let owned: [Owned]
    public let autoRenewables: [AutoRenewable]
    public let nonRenewingPeriods: [SubscriptionPeriod]
    /// Non-renewing groups with a period covering `at`.
    public var activeNonRenewingProducts: [String] {
        nonRenewingPeriods.filter { $0.isActive(at: at) }.map(\.productId)
    }

    public init(of state: UserLedger, catalog: ProductCatalog, at instant: Date) {
        at = instant
        var owned: [Owned] = []
        var seenProducts = Set<String>()
        for transaction in state.transactionsInOrder where transaction.kind == .purchase && !transaction.isRevoked
            && transaction.productType.isOwnedForever && seenProducts.insert(transaction.productId).inserted {
            owned.append(Owned(productId: transaction.productId, originalTransactionId: transaction.originalTransactionId,
                               purchaseDate: transaction.purchaseDate))
        }
        self.owned = owned

        var subscriptions: [String: [UserLedger.Transaction]] = [:]
        var originals: [String] = []
        for transaction in state.transactionsInOrder where transaction.productType == .autoRenewable && transaction.kind != .restore {
            if subscriptions[transaction.originalTransactionId] == nil { originals.append(transaction.originalTransactionId) }
            subscriptions[transaction.originalTransactionId, default: []].append(transaction)
        }
        autoRenewables = originals.map { original in
            let all = subscriptions[original] ?? []
            let expires = all.filter { !$0.isRevoked }.compactMap(\.expiresDate).max()
            let latest = all.max { $0.purchaseDate < $1.purchaseDate }
            return AutoRenewable(productId: latest?.productId ?? "", originalTransactionId: original, expiresDate: expires,
                                 isActive: expires.map { instant < $0 } ?? false)
        }
        nonRenewingPeriods = UserDecisions.nonRenewingPeriods(of: state, catalog: catalog)
    }
}
