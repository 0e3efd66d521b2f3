import Foundation
import LedgerDomain

/// `ledger.ownership`: what each user owns, per product.
///
/// Non-consumables and free subscriptions: one row from their original purchase, for ever (a
/// re-purchase or restore is the same row). Auto-renewables: one row per original transaction,
/// expiring at the latest expiry among its non-revoked transactions. Non-renewing subscriptions:
/// one row per product, from its first period's start to its last period's end, periods stacked
/// per group. Revoked purchases give nothing. Whether a row is active is decided when it is read
/// (`expires_at IS NULL OR now() < expires_at`), never stored. Version 2: non-renewing ends as
/// `subscription_periods` v2 computes them (from the chain's start, no month-end drift), and
/// auto-renewables end early where the App Store reported them expired (21006) before their expiry.
public enum OwnershipProjection: UserProjection {
    public static let name = ProjectionName.ownership
    /// Version 3 followed `TransactionClassifier.version` 2 (rows from the classifier over recorded
    /// facts). Version 4: a restore of a purchase the stream never saw is owned since the original
    /// purchase date Apple sends with it, and non-renewing ends follow `subscription_periods` v6.
    public static let version = 4

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("product_id", "text NOT NULL", "the product owned"),
        ProjectionColumn("product_type", "text NOT NULL", "non_consumable, free_subscription, auto_renewable or non_renewing"),
        ProjectionColumn("original_transaction_id", "text NOT NULL", "the purchase the ownership comes from (for non-renewing: the first period's)"),
        ProjectionColumn("owned_since", "timestamptz NOT NULL", "start of ownership"),
        ProjectionColumn("expires_at", "timestamptz", "end of ownership; NULL for ever"),
    ]
    public static let keyColumns = ["product_id", "original_transaction_id"]

    public struct Row: ProjectionRow {
        public let productId: String
        public let productType: ProductType
        public let originalTransactionId: String
        public let ownedSince: Date
        public let expiresAt: Date?

        public var columnValues: [String?] {
            [productId, productType.rawValue, originalTransactionId, Self.text(ownedSince), Self.text(expiresAt)]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        var rows = state.ownedForever.map {
            Row(productId: $0.productId, productType: $0.productType, originalTransactionId: $0.originalTransactionId,
                ownedSince: $0.ownedSince, expiresAt: nil)
        }
        rows += autoRenewableRows(state)
        var byProduct: [String: [SubscriptionPeriod]] = [:]
        for period in state.nonRenewingPeriods(catalog: catalog) { byProduct[period.productId, default: []].append(period) }
        for productId in byProduct.keys.sorted() {
            let periods = byProduct[productId]!
            rows.append(Row(productId: productId, productType: .nonRenewing, originalTransactionId: periods[0].transactionId,
                            ownedSince: periods.map(\.start).min()!, expiresAt: periods.map(\.end).max()))
        }
        return rows
    }

    /// One row per original transaction: from the original purchase to the latest expiry among its
    /// non-revoked transactions; named after the product of its latest transaction.
    private static func autoRenewableRows(_ state: UserLedger) -> [Row] {
        var subscriptions: [String: [UserLedger.Transaction]] = [:]
        var originals: [String] = []
        for transaction in state.transactionsInOrder where transaction.productType == .autoRenewable && transaction.kind != .restore {
            if subscriptions[transaction.originalTransactionId] == nil { originals.append(transaction.originalTransactionId) }
            subscriptions[transaction.originalTransactionId, default: []].append(transaction)
        }
        return originals.compactMap { original in
            let all = subscriptions[original] ?? []
            guard let expires = all.filter({ !$0.isRevoked }).compactMap(\.periodEnd).max(),
                  let start = state.transactions[original]?.purchaseDate ?? all.first?.purchaseDate
            else { return nil }
            let latest = all.max { $0.purchaseDate < $1.purchaseDate }
            return Row(productId: latest?.productId ?? "", productType: .autoRenewable, originalTransactionId: original,
                       ownedSince: start, expiresAt: expires)
        }
    }
}
