import LedgerDomain

/// `ledger.consumable_balances`: per user and consumable, purchased minus consumed.
///
/// Purchased counts purchases' quantities less what refunds took back of them: all of a fully
/// refunded purchase, the refunded share of the units of a prorated refund (Apple's
/// `revocationPercentage` applies to the whole quantity). A balance goes below zero only when a
/// refund takes back units already used; it is shown, and flagged, not hidden.
public enum ConsumableBalancesProjection: UserProjection {
    public static let name = ProjectionName.consumableBalances
    /// Version 2: a purchase counts as a consumable's when the catalog said so when it was recorded
    /// (version 1 also counted products the current catalog calls consumable). Version 3: a
    /// prorated refund takes back its share of the units, not all of them.
    public static let version = 3

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("product_id", "text NOT NULL", "the consumable"),
        ProjectionColumn("purchased", "bigint NOT NULL", "units bought, less the units refunds took back"),
        ProjectionColumn("consumed", "bigint NOT NULL", "units the app reported used"),
        ProjectionColumn("balance", "bigint NOT NULL", "purchased - consumed"),
        ProjectionColumn("overdrawn", "boolean NOT NULL", "balance below zero (a refund after use)"),
    ]
    public static let keyColumns = ["product_id"]

    public struct Row: ProjectionRow {
        public let balance: ConsumableBalance

        public var columnValues: [String?] {
            [balance.productId, String(balance.purchased), String(balance.consumed), String(balance.balance),
             balance.isOverdrawn ? "true" : "false"]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        state.consumableBalances.map(Row.init(balance:))
    }
}
