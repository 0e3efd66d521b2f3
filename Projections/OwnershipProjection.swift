import Foundation
import LedgerDomain

/// `ledger.ownership`: what each user owns, per product.
///
/// Non-consumables and free subscriptions: one row from their original purchase, for ever (a
/// re-purchase or restore is the same row). Auto-renewables: one row per original transaction,
/// expiring at the latest expiry among its non-revoked transactions. Non-renewing subscriptions:
/// one row per product, from its first period's start to its last period's end, periods stacked
/// per group. Revoked purchases give nothing. Whether a row is active is decided when it is read
/// (`expires_at IS NULL OR now() < expires_at`), never stored.
public enum OwnershipProjection: UserProjection {
    public static let name = "ownership"
    public static let version = 1

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("product_id", "text NOT NULL", "the product owned"),
        ProjectionColumn("product_type", "text NOT NULL", "non_consumable, free_subscription, auto_renewable or non_renewing"),
        ProjectionColumn("original_transaction_id", "text NOT NULL", "the purchase the ownership comes from (for non-renewing: the first period's)"),
        ProjectionColumn("owned_since", "timestamptz NOT NULL", "start of ownership"),
        ProjectionColumn("expires_at", "timestamptz", "end of ownership; NULL for ever"),
    ]
    public static let keyColumns = ["product_id", "original_transaction_id"]

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]] {
        let entitlements = Entitlements(of: state, catalog: catalog, at: Date(timeIntervalSince1970: 0))
        var rows: [[String?]] = []
        for owned in entitlements.owned {
            let type = state.transactions[owned.originalTransactionId]?.productType ?? .nonConsumable
            rows.append([owned.productId, type.rawValue, owned.originalTransactionId, text(owned.purchaseDate), nil])
        }
        for subscription in entitlements.autoRenewables {
            guard let expires = subscription.expiresDate,
                  let start = state.transactions[subscription.originalTransactionId]?.purchaseDate
                    ?? state.transactionsInOrder.first(where: { $0.originalTransactionId == subscription.originalTransactionId })?.purchaseDate
            else { continue }
            rows.append([subscription.productId, ProductType.autoRenewable.rawValue, subscription.originalTransactionId,
                         text(start), text(expires)])
        }
        var byProduct: [String: [SubscriptionPeriod]] = [:]
        for period in entitlements.nonRenewingPeriods { byProduct[period.productId, default: []].append(period) }
        for productId in byProduct.keys.sorted() {
            let periods = byProduct[productId]!
            rows.append([productId, ProductType.nonRenewing.rawValue, periods[0].transactionId,
                         text(periods.map(\.start).min()), text(periods.map(\.end).max())])
        }
        return rows
    }
}
