import Foundation
import LedgerDomain

/// A user's rows of every read model the entitlements rule takes, and whether the user has
/// any event at all, in one statement (one round trip).
public struct EntitlementRows: Sendable {
    /// A row of `ledger.ownership`.
    public struct Owned: Sendable, Hashable {
        public let productId: String
        public let productType: ProductType
        public let originalTransactionId: String
        public let ownedSince: Date
        public let expiresAt: Date?

        public init(productId: String, productType: ProductType, originalTransactionId: String, ownedSince: Date, expiresAt: Date?) {
            self.productId = productId
            self.productType = productType
            self.originalTransactionId = originalTransactionId
            self.ownedSince = ownedSince
            self.expiresAt = expiresAt
        }

        /// The row as the entitlement rule takes it.
        public var owned: Entitlements.Owned {
            Entitlements.Owned(productId: productId, productType: productType, originalTransactionId: originalTransactionId,
                               ownedSince: ownedSince)
        }
    }

    /// A row of `ledger.consumable_balances`.
    public struct Balance: Sendable, Hashable {
        public let productId: String
        public let purchased: Int64
        public let consumed: Int64
        public let balance: Int64
        public let overdrawn: Bool

        public init(productId: String, purchased: Int64, consumed: Int64, balance: Int64, overdrawn: Bool) {
            self.productId = productId
            self.purchased = purchased
            self.consumed = consumed
            self.balance = balance
            self.overdrawn = overdrawn
        }

        /// The row as the entitlement rule takes it.
        public var consumableBalance: ConsumableBalance {
            ConsumableBalance(productId: productId, purchased: Int(purchased), consumed: Int(consumed))
        }
    }

    /// A row of `ledger.subscription_periods`.
    public struct Period: Sendable, Hashable {
        public let transactionId: String
        public let originalTransactionId: String
        public let productId: String
        public let group: String
        public let kind: SubscriptionKind
        public let start: Date
        public let end: Date

        public init(transactionId: String, originalTransactionId: String, productId: String, group: String, kind: SubscriptionKind, start: Date, end: Date) {
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId
            self.productId = productId
            self.group = group
            self.kind = kind
            self.start = start
            self.end = end
        }

        /// The row as the entitlement rule takes it.
        public var period: SubscriptionPeriod {
            SubscriptionPeriod(transactionId: transactionId, productId: productId, group: group, kind: kind, start: start, end: end)
        }
    }

    public var owned: [Owned] = []
    public var periods: [Period] = []
    public var balances: [Balance] = []
    public var userExists = false

    public init() {}
}
