import LedgerDomain

/// `ledger.consumable_balances`: per user and consumable, purchased minus consumed.
///
/// Purchased counts non-revoked purchases' quantities. A balance goes below zero only when a
/// purchase is revoked after it was used; it is shown, and flagged, not hidden.
public enum ConsumableBalancesProjection: UserProjection {
    public static let name = "consumable_balances"
    public static let version = 1

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("product_id", "text NOT NULL", "the consumable"),
        ProjectionColumn("purchased", "bigint NOT NULL", "units bought, revoked purchases excluded"),
        ProjectionColumn("consumed", "bigint NOT NULL", "units the app reported used"),
        ProjectionColumn("balance", "bigint NOT NULL", "purchased - consumed"),
        ProjectionColumn("overdrawn", "boolean NOT NULL", "balance below zero (a revocation after use)"),
    ]
    public static let keyColumns = ["product_id"]

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]] {
        var products = Set(state.consumed.keys)
        for transaction in state.transactionsInOrder where transaction.kind == .purchase
            && (transaction.productType == .consumable || catalog.type(of: transaction.productId) == .consumable) {
            products.insert(transaction.productId)
        }
        return products.sorted().map { productId in
            let balance = state.balance(of: productId)
            let consumed = state.consumed[productId, default: 0]
            return [productId, String(balance + consumed), String(consumed), String(balance), balance < 0 ? "true" : "false"]
        }
    }
}
