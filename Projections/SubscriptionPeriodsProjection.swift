import LedgerDomain

/// `ledger.subscription_periods`: every paid subscription period, `[period_start, period_end)`.
///
/// Non-renewing: stacked per subscription group from the later of the purchase date and the end
/// of the group's previous period, in the catalog's duration; a revoked purchase is removed and the
/// later periods move up. Auto-renewable: each non-revoked transaction's `[purchase, expires)`.
public enum SubscriptionPeriodsProjection: UserProjection {
    public static let name = "subscription_periods"
    public static let version = 1

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("transaction_id", "text NOT NULL", "the transaction that paid for the period"),
        ProjectionColumn("original_transaction_id", "text NOT NULL", "its original transaction"),
        ProjectionColumn("product_id", "text NOT NULL", "the subscription product"),
        ProjectionColumn("subscription_group", "text NOT NULL", "non-renewing periods of one group stack"),
        ProjectionColumn("kind", "text NOT NULL", "non_renewing or auto_renewable"),
        ProjectionColumn("period_start", "timestamptz NOT NULL", "start, inclusive"),
        ProjectionColumn("period_end", "timestamptz NOT NULL", "end, exclusive"),
    ]
    public static let keyColumns = ["transaction_id"]

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]] {
        var rows: [[String?]] = UserDecisions.nonRenewingPeriods(of: state, catalog: catalog).map { period in
            let original = state.transactions[period.transactionId]?.originalTransactionId ?? period.transactionId
            return [period.transactionId, original, period.productId, period.group, ProductType.nonRenewing.rawValue,
                    text(period.start), text(period.end)]
        }
        for period in UserDecisions.autoRenewablePeriods(of: state, catalog: catalog) {
            let original = state.transactions[period.transactionId]?.originalTransactionId ?? period.transactionId
            rows.append([period.transactionId, original, period.productId, period.group, ProductType.autoRenewable.rawValue,
                         text(period.start), text(period.end)])
        }
        return rows
    }
}
